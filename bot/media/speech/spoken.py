"""What is said aloud of a written answer.

Code blocks, tables and URLs read out are noise: each becomes a short phrase ("code, see the
text", "a link") and the text message, always sent too, holds them. Markdown marks are dropped,
a link keeps its label. An answer longer than `max_chars` is spoken up to the last sentence end
that fits (the rest is in the text only). The phrases are said in the answer's language; the
three languages here are the ones both engines have voices for.
"""

from __future__ import annotations

import re

PHRASES = {
    "en": {"code": "Code, see the text.", "table": "A table, see the text.", "link": "a link"},
    "it": {"code": "Codice, vedi il testo.", "table": "Una tabella, vedi il testo.",
           "link": "un link"},
    "es": {"code": "Código, mira el texto.", "table": "Una tabla, mira el texto.",
           "link": "un enlace"},
}
_FENCED = re.compile(r"^[ \t]*(```|~~~)[^\n]*\n.*?(?:^[ \t]*\1[ \t]*$|\Z)", re.S | re.M)
_TABLE = re.compile(r"(?:^[ \t]*\|.*\|[ \t]*(?:\n|\Z))+", re.M)
_ONE_LINE_FENCE = re.compile(r"```[^`\n]{0,2000}```")
_INLINE_CODE = re.compile(r"`([^`\n]{1,200})`")
_MD_LINK = re.compile(r"!?\[([^\]\n]{0,200})\]\(\s*[^)\s]{1,2000}\s*\)")
_URL = re.compile(r"\b(?:https?://|www\.)[^\s<>()\]]{0,2000}[^\s<>()\].,;:!?'\"]", re.I)
_HEADING = re.compile(r"^[ \t]{0,3}#{1,6}[ \t]+", re.M)
_QUOTE_OR_BULLET = re.compile(r"^[ \t]*(?:>+|[-*+•]|\d{1,3}[.)])[ \t]+", re.M)
_EMPHASIS = re.compile(r"(\*\*|__|\*|_|~~)(?=\S)(.{1,300}?)(?<=\S)\1")
_RULE = re.compile(r"^[ \t]*(?:[-*_][ \t]*){3,}$", re.M)
_SPACES = re.compile(r"[ \t]+")
_BLANKS = re.compile(r"\n\s*\n+")
_SENTENCE_END = re.compile(r"[.!?…](?=\s|$)")


def phrases(language: str) -> dict[str, str]:
    return PHRASES.get(language, PHRASES["en"])


def spoken_text(answer: str, language: str, max_chars: int) -> str:
    """The part of `answer` to say aloud; '' when nothing is worth saying."""
    said = phrases(language)
    # Only the start can be spoken: the rest is never scanned (each pattern is linear in it).
    text = answer[:max(4 * max_chars, 4000)]
    text = _FENCED.sub(f"\n{said['code']}\n", text)
    text = _ONE_LINE_FENCE.sub(said["code"], text)
    text = _TABLE.sub(f"{said['table']}\n", text)
    text = _MD_LINK.sub(lambda m: m.group(1) or said["link"], text)
    text = _URL.sub(said["link"], text)
    text = _INLINE_CODE.sub(lambda m: m.group(1) if len(m.group(1)) <= 40 else said["code"], text)
    text = _RULE.sub("", text)
    text = _HEADING.sub("", text)
    text = _QUOTE_OR_BULLET.sub("", text)
    text = _EMPHASIS.sub(r"\2", text)
    text = _SPACES.sub(" ", text)
    text = _BLANKS.sub("\n", text).strip()
    return _first_part(text, max_chars)


def _first_part(text: str, max_chars: int) -> str:
    """At most `max_chars`: up to the last sentence end that fits, else the last word."""
    if len(text) <= max_chars:
        return text
    head = text[:max_chars]
    ends = [m.end() for m in _SENTENCE_END.finditer(head)]
    if ends and ends[-1] >= max_chars // 3:
        return head[:ends[-1]].strip()
    cut = head.rfind(" ")
    return (head[:cut] if cut > max_chars // 3 else head).strip()


# Common words of each spoken language: articles, pronouns, prepositions, the commonest verbs
# and what people say to a bot. A word two languages share counts for both.
_WORDS = {
    "it": frozenset("""
        il lo la gli le un uno una di da del dello della dei degli delle al allo alla ai agli
        alle dal dalla nel nello nella nei nelle sul sulla sui su in a con per tra fra e ed o ma che
        chi se non è sono sei siamo siete era erano sarà ho hai ha abbiamo avete hanno essere avere
        fare fai faccio questo questa questi queste quello quella quelli anche ancora però
        perché come dove quando cosa quanto quanti molto poco tutto tutti tutte già più meno
        sempre mai ciao grazie prego sì certo certamente bene male buongiorno buonasera
        buonanotte oggi domani ieri stai sta sto stanno puoi posso può possiamo vuoi voglio
        vorrei devi devo deve ti mi ci vi si ne io tu lui lei noi voi loro mio mia tuo tua suo
        sua te tuoi tue miei mie suoi sue nostro vostro pronto pronti allora ecco volentieri
        aiuto aiutare aiutarti dimmi scusa scusami
        qui qua lì là niente nulla nessuno qualcosa ogni altro altra dopo prima subito ora
        adesso va vado andiamo capito piace serve ricorda ricordami perfetto mille fatto
    """.split()),
    "es": frozenset("""
        el la los las lo un una unos unas de del al y o u que en es son soy eres somos he está
        están estás estoy estamos ser estar era hay por para con sin pero más muy también como
        cómo qué quién dónde cuándo cuánto cuál porque hola gracias sí claro bien bueno buena
        buenos buenas días tardes noches hoy mañana ayer puedo puedes puede podemos quiero
        quieres quiere tengo tienes tiene hacer hago haces yo tú él ella nosotros ellos ellas
        usted ustedes su sus tu tus mi mis me te ti se nos le les este esta esto estos estas ese
        esa eso aquí allí ahí todo todos toda nada nadie algo ya ahora siempre nunca ayudar
        ayudo ayudarte ayuda dime perdón después antes luego entonces vale necesitas necesito
        gusta recuerda recuérdame perfecto hecho va
    """.split()),
    "en": frozenset("""
        the a an and or but is are was were be been being am have has had do does did will
        would can could should may might must of to in on at by for with from about into
        over after before as it its this that these those there here what which who whom
        whose how why where when i you he she we they me him her us them my your his our
        their not yes hello hi hey thanks thank please sorry sure okay glad help good great
        today tomorrow yesterday just also very all some any more than then if because out
        up get got let like know want need see tell said say time one
    """.split()),
}
# What an unlisted word's letters say on their own: a grave accent (più, già, città) is
# Italian, ñ and the acute á í ó ú (and ü) Spanish; é is both (perché, café).
_SIGNALS = {"it": re.compile(r"[àèìòù]"), "es": re.compile(r"[ñáíóúü]")}
_INVERTED = re.compile(r"[¿¡]")                                  # Spanish only
_ELISION = re.compile(                                            # l'acqua, d'Italia, c'è
    r"\b(?:l|d|c|un|dell|dall|nell|sull|all|quest|quell|tutt|nessun|anch|dov|com|cos|m|t|s|v"
    r"|n)'(?=[^\W\d_])", re.I)
_CONTRACTION = re.compile(r"[^\W\d_]'(?:s|t|re|ll|ve|m|d)\b", re.I)   # it's, don't, I'd
_WORD = re.compile(r"[^\W\d_]+", re.U)
SCANNED = 2000


def language_scores(text: str) -> dict[str, int]:
    """How much of `text` (its first 2,000 characters) reads as each spoken language: its
    common words, accents, ¿ ¡, Italian elisions and English contractions counted."""
    text = text[:SCANNED].replace("’", "'").lower()
    scores = dict.fromkeys(_WORDS, 0)
    for word in _WORD.findall(text):
        known = False
        for language, common in _WORDS.items():
            if word in common:
                scores[language] += 1
                known = True
        if not known:
            for language, signal in _SIGNALS.items():
                if signal.search(word):
                    scores[language] += 1
    scores["es"] += len(_INVERTED.findall(text))
    scores["it"] += len(_ELISION.findall(text))
    scores["en"] += len(_CONTRACTION.findall(text))
    return scores


def leading_language(scores: dict[str, int]) -> str:
    """The language that clearly leads (at least twice the next one's score), else ''."""
    ranked = sorted(scores.items(), key=lambda item: item[1], reverse=True)
    (best, top), (_, second) = ranked[0], ranked[1]
    return best if top > 0 and top >= 2 * second else ""


def guess_language(text: str, default: str = "en") -> str:
    """Which of the spoken languages `text` is written in, else `default` when none clearly
    leads. Looks at the first 2,000 characters: enough for a verdict, bounded in cost."""
    return leading_language(language_scores(text)) or default

"""The console in the operator's language: the one they chose with /language in the terminal,
else the browser's Accept-Language, else `[agent] language` — every page, its menu, its flash
after an action, and not one of the console's own English sentences left on an Italian or
Spanish page."""

from __future__ import annotations

import html
import re
from pathlib import Path

import aiohttp
import pytest
from babel.messages.extract import extract_from_dir

from bot.core.identity import OPERATOR
from bot.language.catalogs import translator
from tests.ops.test_console_browser import PAGES, seed
from tests.support.console_support import CONSOLE, logged_in

TEMPLATES = Path(__file__).resolve().parents[2] / "bot" / "ops" / "console" / "templates"
TAG = re.compile(r"<[^>]+>")


@pytest.fixture
async def http():
    async with aiohttp.ClientSession() as session:
        yield session


def visible(page_html: str) -> str:
    return html.unescape(TAG.sub(" ", page_html))


def template_sentences() -> list[str]:
    """The console's own words without placeholders: each must be translated on the page."""
    found = []
    for _f, _l, message, _c, _x in extract_from_dir(TEMPLATES, method_map=[("**.html", "jinja2")]):
        words = message[0] if isinstance(message, tuple) else message
        if words and "{" not in words and len(words.split()) >= 2:
            found.append(words)
    return found


@pytest.mark.parametrize("accept, language", [("it-IT,it;q=0.9,en;q=0.8", "it"),
                                              ("es-419,es;q=0.9", "es"),
                                              ("fr-FR,fr;q=0.9", "en"), ("", "en")])
async def test_every_page_is_in_the_browsers_language_when_the_operator_chose_none(
        app_factory, http, accept, language):
    app = await app_factory(CONSOLE)
    await seed(app)
    client = await logged_in(app, http)
    tr = translator(language)
    untranslated = [s for s in template_sentences() if tr._(s) != s]
    assert (language == "en") == (untranslated == [])
    for path in PAGES.values():
        async with http.get(client.base + path, headers={**client._headers,
                                                         "Accept-Language": accept}) as response:
            assert response.status == 200, path
            page = await response.text()
        assert f'<html lang="{language}">' in page, path
        assert tr._("Approvals") in visible(page) and tr._("Log out") in visible(page)
        left = [s for s in untranslated if s in visible(page)]
        assert left == [], f"{path}: English left on a {language} page: {left}"


async def test_the_operators_own_choice_wins_over_the_browser(app_factory, http):
    app = await app_factory(CONSOLE)
    await app.services.languages.choose(str(OPERATOR), "es")
    client = await logged_in(app, http)
    async with http.get(client.base + "/jobs", headers={**client._headers,
                                                        "Accept-Language": "it-IT"}) as response:
        page = await response.text()
    assert '<html lang="es">' in page and "Tareas programadas" in page


async def test_without_a_choice_or_a_browser_hint_the_configured_language_is_used(app_factory,
                                                                                  http):
    app = await app_factory({**CONSOLE, "agent": {"language": "it"}})
    client = await logged_in(app, http)
    page = await client.get("/health")
    assert '<html lang="it">' in page.text and "Stato" in visible(page.text)


async def test_the_flash_after_an_action_is_in_the_operators_language(app_factory, http):
    app = await app_factory({**CONSOLE, "agent": {"language": "it"}})
    code = await app.services.senders.pairing_code("telegram:555")
    client = await logged_in(app, http)
    page = await client.act(f"/pairing/{code}/deny", {}, page="/pairing")
    assert "Abbinamento negato a telegram:555." in visible(page.text)
    rows = await app.services.store.fetchall(
        "SELECT detail FROM audit WHERE decision = 'console:pair-deny'")
    assert "Denied pairing for telegram:555." in rows[0]["detail"]   # the audit stays English


async def test_a_login_page_and_a_stale_form_speak_the_browsers_language(app_factory, http):
    app = await app_factory(CONSOLE)
    client = await logged_in(app, http)
    async with http.get(client.base + "/", headers={"Accept-Language": "es"}) as response:
        assert response.status == 401
        assert "No has iniciado sesión" in visible(await response.text())
    async with http.post(client.base + "/receipts/verify", data={"csrf": "0" * 64},
                         headers={**client._headers, "Accept-Language": "it"}) as response:
        assert response.status == 403
        assert "ricarica la pagina" in await response.text()


WORD = re.compile(r"[A-Za-z]{2,}")
NOT_WORDS = {"myclaw"}   # the product's name, the same in every language
COMMANDS = re.compile(r"<code>.*?</code>|<pre class=\"command\">.*?</pre>", re.S)  # typed as is
JINJA = re.compile(r"\{\{.*?\}\}|\{%.*?%\}|\{#.*?#\}", re.S)


def literal_words(template: Path) -> list[str]:
    """English written into a template itself: text between tags, and strings printed there as
    they are (`{{ "x" }}`, `{{ "x" if c else "y" }}`) — never the words a `_()` call translates,
    nor attribute values (CSS classes, ids), nor commands (`<code>`, `<pre class="command">`)."""
    source, found, in_tag, at = COMMANDS.sub("", template.read_text()), [], False, 0
    for match in [*JINJA.finditer(source), None]:
        literal = source[at:match.start() if match else len(source)]
        for piece in re.split(r"([<>])", literal):
            if piece in ("<", ">"):
                in_tag = piece == "<"
            elif not in_tag:
                found += WORD.findall(piece)
        if match is None:
            break
        at = match.end()
        if not in_tag and match.group().startswith("{{"):
            found += printed_words(match.group())
    return [f"{template.name}: {w}" for w in found if w not in NOT_WORDS]


def printed_words(expression: str) -> list[str]:
    import jinja2
    from jinja2 import nodes

    (output,) = jinja2.Environment().parse(expression).body
    words = []
    for node in output.nodes:
        branches = [node.expr1, node.expr2] if isinstance(node, nodes.CondExpr) else [node]
        words += [w for b in branches if isinstance(b, nodes.Const) and isinstance(b.value, str)
                  for w in WORD.findall(b.value)]
    return words


def test_no_template_writes_a_word_outside_the_catalog():
    assert [w for t in sorted(TEMPLATES.glob("*.html")) for w in literal_words(t)] == []


def test_the_template_scan_finds_english_text_and_printed_strings(tmp_path):
    planted = tmp_path / "page.html"
    planted.write_text('<h1>{{ _("Jobs") }}</h1><p>No jobs yet.</p>'
                       '{{ "on" if up else "down" }}<a title="{{ _("x") }}">myclaw</a>')
    assert literal_words(planted) == ["page.html: No", "page.html: jobs", "page.html: yet",
                                      "page.html: on", "page.html: down"]

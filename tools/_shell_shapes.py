"""The argument shapes known to be safe, per read-only program (and git subcommand).

A command is medium only when its program is listed here and every option it uses is one of
that program's listed spellings: exact short letters (grouped or not), exact long options (no
abbreviations: GNU getopt takes `--recur` for `--recursive`), with or without a value as
listed. Everything else — an option not listed, a `rev:path`, a subcommand not listed — is not
a known shape, so the command is high. New spellings of old tricks therefore fail closed.

A shape also says what the program reads: named files, names only, or every file below a folder
(`tree`: a recursive search, ripgrep, diff of two folders), which the caller rates as reading
every secret file that folder holds.
"""

from __future__ import annotations

from dataclasses import dataclass, field


def _set(text: str) -> frozenset[str]:
    return frozenset(text.split())


@dataclass(frozen=True)
class Shape:
    """What one program may be given and still only read what it names."""

    flags: str = ""                     # short options without a value
    valued: str = ""                    # short options that take a value (glued or next word)
    long: frozenset[str] = frozenset()           # long options without a value
    long_valued: frozenset[str] = frozenset()    # long options with a value (=x or next word)
    long_optional: frozenset[str] = frozenset()  # long options with an optional =value
    tree_flags: str = ""                # short options that make it read a whole tree
    long_tree: frozenset[str] = frozenset()
    numeric: bool = False               # `-5` is a count (head, tail, git log)
    reads_tree: bool = False            # always reads every file below its folders (rg)
    dir_operands_tree: bool = False     # a folder operand means every file in it (diff)
    max_operands: int | None = None     # more would be written to (uniq's output file)
    operand_prefix: str = ""            # every operand must start with it (date +FORMAT)
    revisions: bool = False             # operands are revisions or paths (git)


@dataclass
class Parsed:
    """What parsing a command's arguments against its shape found."""

    problem: str = ""
    tree: bool = False
    operands: list[str] = field(default_factory=list)
    options: list[str] = field(default_factory=list)


_COLOR = _set("--color --colour")
SHAPES: dict[str, Shape] = {
    "ls": Shape(flags="aAlhtrSdF1RicsnugGpoUvkLX", long=_set(
        "--all --almost-all --human-readable --classify --reverse --recursive --size --inode "
        "--directory --full-time --dereference --numeric-uid-gid --si"),
        long_optional=_COLOR | _set("--sort --time-style --time --indicator-style")),
    "cat": Shape(flags="AbeEnstTuv", long=_set(
        "--number --show-all --number-nonblank --squeeze-blank --show-ends --show-tabs "
        "--show-nonprinting")),
    "head": Shape(flags="qvz", valued="nc", numeric=True,
                  long=_set("--quiet --silent --verbose --zero-terminated"),
                  long_valued=_set("--lines --bytes")),
    "tail": Shape(flags="qvz", valued="nc", numeric=True,
                  long=_set("--quiet --silent --verbose --zero-terminated"),
                  long_valued=_set("--lines --bytes")),
    "wc": Shape(flags="clmwL", long=_set("--bytes --chars --lines --words --max-line-length")),
    "grep": Shape(flags="EFGPivwxcLlnhHoqsaIzZTUby", valued="eABCm", tree_flags="rR", long=_set(
        "--ignore-case --no-ignore-case --invert-match --word-regexp --line-regexp --count "
        "--files-with-matches --files-without-match --line-number --no-filename "
        "--with-filename --only-matching --quiet --silent --no-messages --extended-regexp "
        "--fixed-strings --basic-regexp --perl-regexp --text --null --null-data --byte-offset "
        "--initial-tab"),
        long_valued=_set("--regexp --after-context --before-context --context --max-count "
                         "--include --exclude --exclude-dir --label"),
        long_optional=_COLOR, long_tree=_set("--recursive --dereference-recursive")),
    "rg": Shape(flags="iSsFwxvcnNlHhoqauUL", valued="eABCmgtTM", reads_tree=True, long=_set(
        "--ignore-case --smart-case --case-sensitive --fixed-strings --word-regexp "
        "--line-regexp --invert-match --count --line-number --no-line-number "
        "--files-with-matches --files-without-match --with-filename --no-filename "
        "--only-matching --quiet --hidden --no-ignore --follow --files --text --vimgrep "
        "--no-heading --heading --column --trim --json --count-matches --unrestricted"),
        long_valued=_set("--regexp --after-context --before-context --context --max-count "
                         "--glob --iglob --type --type-not --max-depth --max-columns --sort "
                         "--sortr --color --max-filesize")),
    "pwd": Shape(flags="LP"),
    "echo": Shape(flags="neE"),
    "date": Shape(flags="uR", valued="d", operand_prefix="+",
                  long=_set("--utc --universal --rfc-email"),
                  long_valued=_set("--date --rfc-3339"), long_optional=_set("--iso-8601")),
    "whoami": Shape(max_operands=0),
    "uname": Shape(flags="asnrvmpio", max_operands=0, long=_set(
        "--all --kernel-name --nodename --kernel-release --kernel-version --machine "
        "--processor --hardware-platform --operating-system")),
    "df": Shape(flags="ahHiklPT", valued="tx", long=_set(
        "--human-readable --si --inodes --local --print-type --all --total --portability"),
        long_valued=_set("--type --exclude-type --block-size"), long_optional=_set("--output")),
    "du": Shape(flags="achsSxLlbkmD0", valued="dBt", long=_set(
        "--all --human-readable --summarize --total --apparent-size --bytes --si "
        "--one-file-system --separate-dirs --count-links --dereference --null"),
        long_valued=_set("--max-depth --block-size --threshold --exclude --time-style"),
        long_optional=_set("--time")),
    "stat": Shape(flags="LftZ", valued="c", long=_set("--dereference --file-system --terse"),
                  long_valued=_set("--format --printf")),
    "file": Shape(flags="bhiLNkrz0", long=_set(
        "--brief --mime --mime-type --mime-encoding --no-dereference --dereference "
        "--keep-going --raw --uncompress --no-pad --print0")),
    "sort": Shape(flags="bdfgiMhnRrVscCuz", valued="ktS", long=_set(
        "--ignore-leading-blanks --dictionary-order --ignore-case --general-numeric-sort "
        "--ignore-nonprinting --month-sort --human-numeric-sort --numeric-sort --random-sort "
        "--reverse --version-sort --stable --check --unique --zero-terminated"),
        long_valued=_set("--key --field-separator --buffer-size")),
    "uniq": Shape(flags="cdDiuz", valued="fsw", max_operands=1, long=_set(
        "--count --repeated --unique --ignore-case --zero-terminated"),
        long_valued=_set("--skip-fields --skip-chars --check-chars"),
        long_optional=_set("--all-repeated --group")),
    "diff": Shape(flags="qsiEZbwBautTyp", valued="UCW", dir_operands_tree=True, long=_set(
        "--brief --report-identical-files --ignore-case --ignore-tab-expansion "
        "--ignore-trailing-space --ignore-space-change --ignore-all-space "
        "--ignore-blank-lines --text --side-by-side --expand-tabs --initial-tab --minimal "
        "--normal --strip-trailing-cr --suppress-common-lines --show-c-function"),
        long_optional=_COLOR | _set("--unified --context"), long_valued=_set("--width")),
}

# git: only these subcommands, each with its own shape. `log` prints commits, never a file's
# content (no -p, -L, --cc, ...); `diff` only its summaries (names and counts) or two named
# working-tree files (--no-index); `status` names (never -v/--verbose: that prints the staged
# diff, -vv the unstaged one too, from the index where no mask reaches). Everything else reads
# or changes the repository in ways not listed here: high.
_GIT_SUMMARY = _set("--stat --shortstat --numstat --name-only --name-status --summary")
_STATUS = Shape(flags="sbz", revisions=True, long=_set(
    "--short --branch --long --ignored --show-stash --ahead-behind --no-ahead-behind"),
    long_optional=_set("--porcelain --untracked-files --ignore-submodules"))
GIT_SHAPES: dict[str, Shape] = {
    "status": _STATUS,
    "log": Shape(valued="n", numeric=True, revisions=True, long=_set(
        "--oneline --graph --decorate --no-decorate --all --reverse --no-merges --merges "
        "--first-parent --abbrev-commit --date-order --topo-order --follow --branches --tags "
        "--remotes") | _GIT_SUMMARY,
        long_valued=_set("--format --pretty --since --until --after --before --author "
                         "--committer --grep --max-count --skip --date")),
    "diff": Shape(revisions=True, long=_GIT_SUMMARY | _set(
        "--cached --staged --no-index --no-renames --ignore-all-space --ignore-space-change")),
}
GIT_SUMMARY = _GIT_SUMMARY

# The git calls an "Always" may cover (tools/_shell_secrets.py `grantable`): these subcommands,
# each only with options that print no file content (no diff, hunk or blob: `status -v`,
# `commit --dry-run -v`, `add -p`, `checkout -p`), open no editor (whose buffer may be a diff),
# read no file into git (`-F`, `--pathspec-from-file`) and run no program named on the command
# line (`rebase --exec`, `fetch --upload-pack`, `clone --template`, signing). Anything else —
# another option, an abbreviation (git takes `--verb` for `--verbose`), an optional value glued
# to a short option (`-uno`) — is asked each time. Operands are not checked here (a secret
# file's name is, by the caller).
_PUSH_FETCH = _set("--all --prune --tags --no-tags --quiet --verbose --dry-run --force")
GIT_GRANTABLE_SHAPES: dict[str, Shape] = {
    "status": _STATUS,
    "add": Shape(flags="AunfvN", long=_set(
        "--all --no-all --update --dry-run --force --verbose --intent-to-add --ignore-errors "
        "--ignore-missing --renormalize --ignore-removal --sparse --refresh"),
        long_valued=_set("--chmod")),
    "commit": Shape(flags="aqsnoi", valued="m", long=_set(
        "--all --amend --no-edit --quiet --signoff --no-signoff --allow-empty "
        "--allow-empty-message --no-verify --only --include --reset-author --no-verbose"),
        long_valued=_set("--message --author --date --cleanup --fixup --squash")),
    "push": Shape(flags="fnuqvd", long=_PUSH_FETCH | _set(
        "--set-upstream --delete --follow-tags --no-verify --atomic"),
        long_optional=_set("--force-with-lease --force-if-includes")),
    "pull": Shape(flags="qv", long=_set(
        "--no-rebase --ff-only --ff --no-ff --quiet --verbose --all --tags --prune --autostash "
        "--no-autostash --no-edit --squash --stat --no-stat"),
        long_optional=_set("--rebase")),
    "fetch": Shape(flags="qvpPtf", long=_PUSH_FETCH | _set("--prune-tags --unshallow"),
                   long_valued=_set("--depth")),
    "checkout": Shape(flags="fqmt", valued="bB", long=_set(
        "--force --quiet --track --no-track --detach --merge"),
        long_valued=_set("--orphan")),
    "switch": Shape(flags="dfqmt", valued="cC", long=_set(
        "--detach --force --discard-changes --quiet --merge --track --no-track"),
        long_valued=_set("--create --force-create --orphan")),
    "branch": Shape(flags="avlrdDmMfqcC", valued="u", long=_set(
        "--all --verbose --list --remotes --delete --move --copy --force --quiet "
        "--show-current --unset-upstream"),
        long_valued=_set("--set-upstream-to"),
        long_optional=_set("--merged --no-merged --contains --no-contains --sort")),
    "merge": Shape(flags="nq", valued="m", long=_set(
        "--ff --no-ff --ff-only --no-edit --squash --abort --continue --quit --quiet --stat "
        "--no-stat --no-commit --commit --no-verify --allow-unrelated-histories"),
        long_valued=_set("--message")),
    "rebase": Shape(flags="q", long=_set(
        "--continue --abort --skip --quit --autostash --no-autostash --root --quiet"),
        long_valued=_set("--onto")),
    "init": Shape(flags="q", valued="b", long=_set("--quiet --bare"),
                  long_valued=_set("--initial-branch --object-format")),
    "clone": Shape(flags="qn", valued="bo", long=_set(
        "--quiet --no-checkout --bare --single-branch --no-single-branch --no-tags"),
        long_valued=_set("--branch --depth --origin")),
    "rm": Shape(flags="rfnq", long=_set(
        "--cached --force --dry-run --quiet --ignore-unmatch --sparse")),
    "mv": Shape(flags="fnkv", long=_set("--force --dry-run --verbose")),
    "restore": Shape(flags="WSq", valued="s", long=_set(
        "--staged --worktree --quiet --ours --theirs --merge --overlay --no-overlay"),
        long_valued=_set("--source")),
    "reset": Shape(flags="q", long=_set("--soft --mixed --hard --merge --keep --quiet")),
    "tag": Shape(flags="adfln", valued="m", long=_set("--annotate --delete --force --list"),
                 long_valued=_set("--message --sort")),
    "remote": Shape(flags="vf", valued="tm", long=_set("--verbose --tags --no-tags")),
}


def parse(program: str, shape: Shape, args: list[str]) -> Parsed:
    """Check every argument against the shape; `problem` names the first that does not fit."""
    out = Parsed()
    i, options_end = 0, False
    while i < len(args):
        arg = args[i]
        i += 1
        if options_end or arg == "-" or not arg.startswith("-"):
            out.operands.append(arg)
            continue
        if arg == "--":
            options_end = True
            continue
        out.options.append(arg)
        taken = _long(shape, arg, out) if arg.startswith("--") else _short(shape, arg, out)
        if taken is None:
            out.problem = f"`{program}` with `{arg[:60]}` is not a shape known to be read-only"
            return out
        i += taken
    return _check_operands(program, shape, out)


def _long(shape: Shape, arg: str, out: Parsed) -> int | None:
    """How many following words the option takes (None: not allowed)."""
    name, equals, _ = arg.partition("=")
    if name in shape.long_optional:
        return 0
    if name in shape.long_valued:
        return 0 if equals else 1
    if equals:
        return None
    if name in shape.long_tree:
        out.tree = True
        return 0
    return 0 if name in shape.long else None


def _short(shape: Shape, arg: str, out: Parsed) -> int | None:
    if shape.numeric and arg[1:].isdigit():
        return 0
    for index, letter in enumerate(arg[1:], start=1):
        if letter in shape.valued:
            return 0 if index + 1 < len(arg) else 1   # -n5, or -n 5
        if letter in shape.tree_flags:
            out.tree = True
        elif letter not in shape.flags:
            return None
    return 0


def _check_operands(program: str, shape: Shape, out: Parsed) -> Parsed:
    if shape.max_operands is not None and len(out.operands) > shape.max_operands:
        out.problem = f"`{program}` with {len(out.operands)} operands writes or is not read-only"
    elif shape.operand_prefix and any(not o.startswith(shape.operand_prefix) for o in out.operands):
        out.problem = f"`{program}` with an operand not starting with {shape.operand_prefix!r}"
    elif shape.revisions and any(":" in o for o in out.operands):
        out.problem = "names a file inside a revision (rev:path reads the repository's objects)"
    out.tree = out.tree or shape.reads_tree
    return out

"""What a terminal shows after some bytes: a small VT100 emulator for the pty tests, enough for
what prompt_toolkit writes (relative and absolute cursor moves, erasing a line or the screen
below the cursor, autowrap, scrolling). Colours, modes and titles are read and ignored.

The escape-stripped byte stream (tests/channels/cli/test_cli_prompts.py `visible`) still holds
text that was drawn and then erased; `lines()` is what a person would read: the lines that
scrolled off the top, then the screen."""

from __future__ import annotations

import re

_SEQUENCE = re.compile(rb"\x1b\[([0-9;?>=]*)([ -/]*)([@-~])|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)"
                       rb"|\x1b[()][0-9A-Za-z]|\x1b[0-9=>A-Za-z]")


class VtScreen:
    def __init__(self, columns: int = 100, rows: int = 40):
        self.columns, self.rows = columns, rows
        self.grid = [[" "] * columns for _ in range(rows)]
        self.scrolled: list[str] = []
        self.row = self.col = 0
        self.wrap_next = False   # the last column was written: the next character wraps

    def feed(self, data: bytes) -> None:
        pos = 0
        for match in _SEQUENCE.finditer(data):
            self._text(data[pos:match.start()])
            if match.group(3) is not None:
                self._csi(match.group(1).decode(), match.group(3).decode())
            pos = match.end()
        self._text(data[pos:])

    def read(self, data: bytes) -> list[str]:
        """`lines()` after `data`."""
        self.feed(data)
        return self.lines()

    def lines(self) -> list[str]:
        """Every line read top to bottom, trailing blanks dropped, then empty lines at the end."""
        shown = [*self.scrolled, *("".join(row).rstrip() for row in self.grid)]
        while shown and not shown[-1]:
            shown.pop()
        return shown

    # --- what the bytes do -------------------------------------------------------------------

    def _text(self, data: bytes) -> None:
        for char in data.decode("utf-8", "replace"):
            if char == "\r":
                self.col, self.wrap_next = 0, False
            elif char == "\n":
                self._down()
            elif char == "\b":
                self.col, self.wrap_next = max(0, self.col - 1), False
            elif char == "\t":
                self.col = min(self.columns - 1, (self.col // 8 + 1) * 8)
            elif char >= " ":
                if self.wrap_next:
                    self.col, self.wrap_next = 0, False
                    self._down()
                self.grid[self.row][self.col] = char
                if self.col == self.columns - 1:
                    self.wrap_next = True
                else:
                    self.col += 1

    def _down(self) -> None:
        self.wrap_next = False
        if self.row == self.rows - 1:
            self.scrolled.append("".join(self.grid.pop(0)).rstrip())
            self.grid.append([" "] * self.columns)
        else:
            self.row += 1

    def _csi(self, params: str, final: str) -> None:
        if params.startswith(("?", ">", "=")):
            return   # private modes (cursor shown, bracketed paste): nothing drawn
        numbers = [int(n) if n else 0 for n in params.split(";")] if params else []
        first = numbers[0] if numbers else 0
        count = max(first, 1)
        self.wrap_next = False
        if final == "A":
            self.row = max(0, self.row - count)
        elif final == "B":
            self.row = min(self.rows - 1, self.row + count)
        elif final == "C":
            self.col = min(self.columns - 1, self.col + count)
        elif final == "D":
            self.col = max(0, self.col - count)
        elif final == "G":
            self.col = min(self.columns - 1, count - 1)
        elif final in "Hf":
            row, col = [*numbers, 1, 1][:2]
            self.row, self.col = min(self.rows, max(row, 1)) - 1, min(self.columns, max(col, 1)) - 1
        elif final == "K":
            line = self.grid[self.row]
            span = {0: range(self.col, self.columns), 1: range(self.col + 1),
                    2: range(self.columns)}.get(first, range(0))
            for col in span:
                line[col] = " "
        elif final == "J":
            if first in (2, 3):
                self.grid = [[" "] * self.columns for _ in range(self.rows)]
                return
            self._csi("0" if first == 0 else "1", "K")
            rows = range(self.row + 1, self.rows) if first == 0 else range(self.row)
            for row in rows:
                self.grid[row] = [" "] * self.columns

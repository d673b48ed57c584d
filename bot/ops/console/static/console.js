// The console works without this file. It only makes two things nicer:
// - times are shown in the browser's own time zone, its name included (the page shows UTC);
// - a form cannot be sent twice by a double tap while the first request is on its way.
"use strict";

const LOCAL_TIME = {year: "numeric", month: "short", day: "numeric", hour: "2-digit",
                    minute: "2-digit", second: "2-digit", timeZoneName: "short"};

function localTimes() {
  for (const node of document.querySelectorAll("time[datetime]")) {
    const seconds = Number(node.getAttribute("datetime"));
    if (!Number.isFinite(seconds)) continue;
    node.title = node.textContent;
    node.textContent = new Date(seconds * 1000).toLocaleString(undefined, LOCAL_TIME);
  }
}

function oneSubmitPerForm() {
  for (const form of document.querySelectorAll("form[method='post']")) {
    form.addEventListener("submit", (event) => {
      if (form.dataset.sent) {
        event.preventDefault();
        return;
      }
      form.dataset.sent = "1";
      // Disable after the submit has captured the pressed button's name/value.
      setTimeout(() => {
        for (const button of form.querySelectorAll("button")) button.disabled = true;
      }, 0);
    });
  }
}

document.addEventListener("DOMContentLoaded", () => {
  localTimes();
  oneSubmitPerForm();
});

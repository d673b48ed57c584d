// The console works without this file. It only makes one thing nicer: a form cannot be sent
// twice by a double tap while the first request is on its way. (Times are the server's: in the
// operator's time zone, named, whatever zone the browser is in.)
"use strict";

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
  oneSubmitPerForm();
});

/* The notifications page: add, pause, resume, delete and test webhooks through the REST API
 * (`QM.api`: same-origin session + CSRF), then re-read the list (`QM.poll`). The API's field
 * errors go next to their inputs; its words are shown as they come. */
(function () {
  "use strict";

  function showErrors(form, errors) {
    form.querySelectorAll("[data-error-for]").forEach(function (el) { el.textContent = ""; el.hidden = true; });
    form.querySelectorAll("[data-field], [data-events]").forEach(function (el) { el.removeAttribute("aria-invalid"); });
    var unplaced = [];
    Object.keys(errors || {}).forEach(function (field) {
      var key = field.split(".")[0];  // `events.0` is the events' slot
      var slot = form.querySelector('[data-error-for="' + key + '"]');
      var text = [].concat(errors[field]).join(" ");
      if (!slot) { unplaced.push(field + ": " + text); return; }
      slot.textContent = slot.textContent ? slot.textContent + " " + text : text;
      slot.hidden = false;
      var input = form.querySelector('[data-field="' + key + '"]') || (key === "events" && form.querySelector("[data-events]"));
      if (input) input.setAttribute("aria-invalid", "true");
    });
    return unplaced;
  }

  function formBody(form) {
    var body = { url: form.querySelector('[data-field="url"]').value.trim() };
    body.events = Array.prototype.filter.call(form.querySelectorAll("[data-event]"), function (box) { return box.checked; })
      .map(function (box) { return box.value; });
    var team = form.querySelector('[data-field="team"]').value;
    if (team) body.team = team;
    var secret = form.querySelector('[data-field="secret"]').value.trim();
    if (secret) body.secret = secret;
    return body;
  }

  function say(ok, text) {
    var out = document.getElementById("hook-result");
    out.hidden = false;
    out.className = ok ? "notice ok" : "notice error";
    out.textContent = text;
  }

  function bindForm(form) {
    var verdict = form.querySelector("[data-verdict]");
    var button = form.querySelector('button[type="submit"]');
    form.addEventListener("submit", function (event) {
      event.preventDefault();
      button.disabled = true;
      verdict.className = "verdict";
      verdict.textContent = "Adding…";
      QM.api("POST", form.dataset.apiUrl, formBody(form)).then(function (result) {
        if (result.status === 201) {
          showErrors(form, {});
          var hook = result.data;
          verdict.className = "verdict ok";
          verdict.textContent = "Hook " + hook.id + " added: it POSTs " + hook.events.join(", ") + " of " +
            (hook.team ? "every job of team " + hook.team : "your own jobs") + ". Send it a test below.";
          document.getElementById("new-secret-hook").textContent = String(hook.id);
          document.getElementById("new-secret-value").textContent = hook.secret;
          document.getElementById("new-secret").hidden = false;
          form.reset();
          return QM.poll();
        }
        var unplaced = showErrors(form, result.data.errors || {});
        verdict.className = "verdict error";
        var placed = Object.keys(result.data.errors || {}).length - unplaced.length;
        verdict.textContent = placed && !unplaced.length ? "Not added: each field marked says why." :
          (result.data.detail || "The API refused the hook (HTTP " + result.status + ").") +
          (unplaced.length ? " " + unplaced.join(" ") : "");
      }).catch(function (error) {
        verdict.className = "verdict error";
        verdict.textContent = "Could not reach the API: " + error.message;
      }).finally(function () { button.disabled = false; });
    });
  }

  /* The hooks' buttons: delegated, so the list's live re-render keeps them working. */
  function bindHooks(list) {
    list.addEventListener("click", function (event) {
      var button = event.target.closest("[data-hook-action]");
      if (!button) return;
      if (button.dataset.confirm && !window.confirm(button.dataset.confirm)) return;
      var body = button.dataset.body ? JSON.parse(button.dataset.body) : undefined;
      button.disabled = true;
      if (button.dataset.hookAction === "test") say(true, "Sending a test…");
      QM.api(button.dataset.method, button.dataset.url, body).then(function (result) {
        var hook = button.closest("[data-hook]").dataset.hook;
        if (button.dataset.hookAction === "test" && result.ok) {
          say(result.data.delivered, "Hook " + hook + ": " + result.data.detail);
        } else if (result.ok) {
          say(true, button.dataset.done || "Done.");
        } else {
          say(false, "Hook " + hook + ": " + (result.data.detail || "refused (HTTP " + result.status + ")."));
        }
        return QM.poll();
      }).catch(function (error) {
        say(false, "Could not reach the API: " + error.message);
      }).finally(function () { button.disabled = false; });
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    var form = document.getElementById("add-hook");
    if (form) bindForm(form);
    var list = document.getElementById("hooks");
    if (list) bindHooks(list);
  });
})();

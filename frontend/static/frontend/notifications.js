/* The notifications page: add, edit, pause, resume, delete and test webhooks, and give one a new
 * signing secret, through the REST API (`QM.api`: same-origin session + CSRF), then re-read the
 * list (`QM.poll`). The API's field errors go next to their inputs; its words are shown as they
 * come. The edit form sits outside the live list, so a refresh never sweeps away what is typed. */
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
          showSecret(hook, "Hook " + hook.id + " added: its signing secret");
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

  function showSecret(hook, title) {
    document.querySelector("#new-secret h2").textContent = title;
    document.getElementById("new-secret-value").textContent = hook.secret;
    document.getElementById("new-secret").hidden = false;
  }

  function describe(hook) {
    var viewer = document.getElementById("edit-hook").dataset.viewer;
    return "it POSTs " + hook.events.join(", ") + " of " +
      (hook.team ? "every job of team " + hook.team : hook.user === viewer ? "your own jobs" : hook.user + "'s own jobs") +
      (hook.active ? "" : ", paused: nothing is sent until it is resumed");
  }

  /* ------------------------------------------------------------------ editing a hook in place */

  var editing = null;  // {id, url, events, team, active}: the hook as the list showed it when opened

  function openEditor(article) {
    var panel = document.getElementById("edit-hook");
    var form = document.getElementById("edit-hook-form");
    editing = {
      id: article.dataset.hook, url: article.dataset.detailUrl, team: article.dataset.team,
      events: article.dataset.events ? article.dataset.events.split(",") : [],
      active: article.dataset.active === "true",
    };
    showErrors(form, {});
    form.querySelector("[data-verdict]").textContent = "";
    document.getElementById("edit-hook-id").textContent = editing.id;
    document.getElementById("edit-hook-shown-url").textContent = article.dataset.shownUrl;
    form.querySelector('[data-field="url"]').value = "";
    form.querySelector('[data-field="url"]').placeholder = article.dataset.shownUrl;
    var team = form.querySelector('[data-field="team"]');
    if (editing.team && !team.querySelector('option[value="' + CSS.escape(editing.team) + '"]')) {
      team.appendChild(new Option("every job of team " + editing.team, editing.team));
    }
    team.value = editing.team;
    form.querySelector('[data-field="active"]').checked = editing.active;
    form.querySelectorAll("[data-event]").forEach(function (box) { box.checked = editing.events.indexOf(box.value) >= 0; });
    panel.hidden = false;
    panel.scrollIntoView({ block: "nearest" });
    form.querySelector('[data-field="url"]').focus();
  }

  /* Only what changed goes in the PATCH: an empty URL keeps the old one (the page never holds it). */
  function changes(form) {
    var body = {};
    var url = form.querySelector('[data-field="url"]').value.trim();
    if (url) body.url = url;
    var events = Array.prototype.filter.call(form.querySelectorAll("[data-event]"), function (box) { return box.checked; })
      .map(function (box) { return box.value; });
    if (events.join(",") !== editing.events.join(",")) body.events = events;
    var team = form.querySelector('[data-field="team"]').value;
    if (team !== editing.team) body.team = team || null;
    var active = form.querySelector('[data-field="active"]').checked;
    if (active !== editing.active) body.active = active;
    return body;
  }

  function bindEditor() {
    var panel = document.getElementById("edit-hook");
    var form = document.getElementById("edit-hook-form");
    if (!form) return;
    var verdict = form.querySelector("[data-verdict]");
    var button = form.querySelector('button[type="submit"]');
    form.querySelector("[data-edit-cancel]").addEventListener("click", function () { panel.hidden = true; editing = null; });
    form.addEventListener("submit", function (event) {
      event.preventDefault();
      if (!editing) return;
      var body = changes(form);
      if (!Object.keys(body).length) {
        verdict.className = "verdict";
        verdict.textContent = "Nothing changed: change the URL, the events, whose jobs or Enabled, or cancel.";
        return;
      }
      button.disabled = true;
      verdict.className = "verdict";
      verdict.textContent = "Saving…";
      var id = editing.id;
      QM.api("PATCH", editing.url, body).then(function (result) {
        if (result.ok) {
          showErrors(form, {});
          panel.hidden = true;
          editing = null;
          say(true, "Hook " + id + " changed: " + describe(result.data) + "." +
            (body.url ? " Deliveries still queued go to the new URL at their next attempt: send a test to check it." : ""));
          return QM.poll();
        }
        var errors = result.data.errors || {};
        var unplaced = showErrors(form, errors);
        verdict.className = "verdict error";
        var placed = Object.keys(errors).length - unplaced.length;
        verdict.textContent = placed && !unplaced.length ? "Not changed: each field marked says why." :
          "Not changed: " + (result.data.detail || "the API refused it (HTTP " + result.status + ").") +
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
      if (button.dataset.hookAction === "edit") { openEditor(button.closest("[data-hook]")); return; }
      if (button.dataset.confirm && !window.confirm(button.dataset.confirm)) return;
      var body = button.dataset.body ? JSON.parse(button.dataset.body) : undefined;
      button.disabled = true;
      if (button.dataset.hookAction === "test") say(true, "Sending a test…");
      QM.api(button.dataset.method, button.dataset.url, body).then(function (result) {
        var hook = button.closest("[data-hook]").dataset.hook;
        if (button.dataset.hookAction === "test" && result.ok) {
          say(result.data.delivered, "Hook " + hook + ": " + result.data.detail);
        } else if (button.dataset.hookAction === "rotate" && result.ok) {
          showSecret(result.data, "Hook " + hook + ": its new signing secret");
          say(true, "Hook " + hook + " has a new signing secret, shown above this once: the old one is refused from now on.");
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

  /* A hook's History, once opened, stays open across the list's live re-render (which replaces
     its elements every 10 s), until it is closed. */
  function keepHistoryOpen(list) {
    var open = {};
    list.addEventListener("toggle", function (event) {  // toggle does not bubble: caught on the way down
      var details = event.target;
      if (!details.matches || !details.matches("details[data-history]")) return;
      if (details.open) open[details.dataset.history] = true; else delete open[details.dataset.history];
    }, true);
    new MutationObserver(function () {
      list.querySelectorAll("details[data-history]").forEach(function (details) {
        if (open[details.dataset.history] && !details.open) details.open = true;
      });
    }).observe(list, { childList: true });
  }

  document.addEventListener("DOMContentLoaded", function () {
    var form = document.getElementById("add-hook");
    if (form) bindForm(form);
    var list = document.getElementById("hooks");
    if (list) { bindHooks(list); keepHistoryOpen(list); }
    bindEditor();
  });
})();

/* The Nodes page's "Schedule a window" form (admins): POST maintenance-windows/ through the REST
 * API (`QM.api`: same-origin session + CSRF), then re-read the page's live fragments (`QM.poll`).
 * The API's field errors go next to their inputs; its words are shown as they come. The time is
 * typed in UTC (the pages' times are UTC), the length in hours. */
(function () {
  "use strict";

  function showErrors(form, errors) {
    form.querySelectorAll("[data-error-for]").forEach(function (el) { el.textContent = ""; el.hidden = true; });
    form.querySelectorAll("[data-field]").forEach(function (el) { el.removeAttribute("aria-invalid"); });
    var unplaced = [];
    Object.keys(errors || {}).forEach(function (field) {
      var key = field.split(".")[0];
      var slot = form.querySelector('[data-error-for="' + key + '"]');
      var text = [].concat(errors[field]).join(" ");
      if (!slot) { unplaced.push(field + ": " + text); return; }
      slot.textContent = text;
      slot.hidden = false;
      var input = form.querySelector('[data-field="' + key + '"]');
      if (input) input.setAttribute("aria-invalid", "true");
    });
    return unplaced;
  }

  function value(form, name) {
    return form.querySelector('[data-field="' + name + '"]').value.trim();
  }

  function formBody(form) {
    var body = {};
    var nodes = value(form, "nodes");
    if (nodes) body.nodes = nodes.split(",").map(function (n) { return n.trim(); }).filter(Boolean);
    var pool = value(form, "pool");
    if (pool) body.pool = pool;
    if (!nodes && !pool) body.nodes = [];
    var start = value(form, "start_at");
    if (start) body.start_at = start + (start.length === 16 ? ":00Z" : "Z");
    var hours = value(form, "duration_s");
    if (hours) body.duration_s = isFinite(Number(hours)) ? Math.round(Number(hours) * 3600) : hours;
    body.reason = value(form, "reason");
    return body;
  }

  /* The length is typed in hours but sent in seconds, and the API's words count seconds: under
   * the hours field "less than or equal to 2147483647" read as hours. Say what was sent. */
  function inHours(errors, hours, seconds) {
    if (errors.duration_s && typeof seconds === "number") {
      errors.duration_s = [].concat(errors.duration_s).join(" ") +
        " (The API counts seconds: " + hours + " h is " + seconds + " s.)";
    }
    return errors;
  }

  document.addEventListener("DOMContentLoaded", function () {
    var form = document.getElementById("maintenance-form");
    if (!form) return;
    var verdict = form.querySelector("[data-verdict]");
    var button = form.querySelector('button[type="submit"]');
    form.addEventListener("submit", function (event) {
      event.preventDefault();
      button.disabled = true;
      verdict.className = "verdict";
      verdict.textContent = "Scheduling…";
      var body = formBody(form);
      QM.api("POST", form.dataset.apiUrl, body).then(function (result) {
        if (result.status === 201) {
          showErrors(form, {});
          var w = result.data;
          var jobs = w.affected_running_jobs.length;
          verdict.className = "verdict ok";
          verdict.textContent = "Maintenance window " + w.id + " scheduled on " + w.nodes.join(", ") + ". " +
            (jobs ? jobs + " running job" + (jobs > 1 ? "s" : "") + " will still hold GPUs when it begins: drain " +
                    "the nodes or cancel them."
                  : "No running job will still hold GPUs when it begins.");
          form.reset();
          return QM.poll();
        }
        var unplaced = showErrors(form, inHours(result.data.errors || {}, value(form, "duration_s"), body.duration_s));
        verdict.className = "verdict error";
        verdict.textContent = (result.data.detail || "The API refused the window (HTTP " + result.status + ").") +
          (unplaced.length ? " " + unplaced.join(" ") : "");
        return null;
      }).catch(function (error) {
        verdict.className = "verdict error";
        verdict.textContent = "Could not reach the API: " + error.message;
      }).finally(function () { button.disabled = false; });
    });
  });
})();

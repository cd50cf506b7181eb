/* The Nodes page's "Schedule a window" form (admins): POST maintenance-windows/ through the REST
 * API (`QM.api`: same-origin session + CSRF), then re-read the page's live fragments (`QM.poll`).
 * The API's field errors go next to their inputs (`QM.placeErrors`: a bound the API gives in
 * seconds is said in hours too under the length, typed in hours), and the sentence under the
 * form names them by their labels (`QM.refusalSentence`). The time is typed in UTC (the
 * pages' times are UTC). */
(function () {
  "use strict";

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
      QM.api("POST", form.dataset.apiUrl, formBody(form)).then(function (result) {
        if (result.status === 201) {
          QM.showErrors(form, {});
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
        // Each field at fault by the form's label ("From (UTC): give when …"), not the API's
        // sentence, which names its fields ("start_at: …") and says seconds.
        var said = QM.placeErrors(form, result.data.errors || {});
        verdict.className = "verdict error";
        verdict.textContent = QM.refusalSentence(
          said, result.data.detail || "The API refused the window (HTTP " + result.status + ").");
        return null;
      }).catch(function (error) {
        verdict.className = "verdict error";
        verdict.textContent = "Could not reach the API: " + error.message;
      }).finally(function () { button.disabled = false; });
    });
  });
})();

"""`qm cancel` (`scancel`, by ids or by filters), `qm hold`, `qm release` and `qm requeue`: every
job named read first, none acted on if one is wrong, then one request per job named (one that
changed meanwhile is an error line, the others still act), or one for a whole job array."""

from __future__ import annotations

import argparse
import re
import sys
from typing import Any

from controlplane.cli import account, arguments, output
from controlplane.cli.client import LARGEST_PAGE, Api, ApiError, CliError, UsageError, refusal
from controlplane.cli.jobs.states import FINISHED_STATES

#: The fields `qm cancel`, `hold`, `release` and `requeue` send (the action's body, cancel's
#: filters of jobs/) → their flags, as client.refusal names them.
ACTION_FLAGS = {"reason": "reason", "states": "states", "state": "state", "name": "name", "name_exact": "name",
                "user": "user"}

CANCELLABLE_STATES = ("pending", "running")


def cmd_cancel(api: Api, args: argparse.Namespace) -> int:
    """Cancel each job named (`scancel`), or every task of an array still pending or running, or
    the jobs the filters pick (`scancel -n NAME -t PENDING -u USER`)."""
    filters = [flag for flag in ("name", "state", "user") if getattr(args, flag) is not None]
    if filters:
        if args.jobs or args.array:
            raise UsageError(f"give job ids, --array, or --{filters[0]} and the other filters, not both")
        args.jobs = [str(job_id) for job_id in _jobs_picked(api, args)]
        if not args.jobs:
            output.note("No job matched: nothing cancelled.")
            return 0
    return _act_on_jobs(api, args, "cancel")


def _jobs_picked(api: Api, args: argparse.Namespace) -> list[int]:
    """The ids of the jobs `qm cancel --name/--state/--user` picks, as scancel's filters do: the
    name whole (`?name_exact=`, as `qm list -n` lists them; the API's `?name=` matches a part of
    it: `-n train` would have cancelled pretrain-7b too), waiting or running (or the --state given), and the user's own jobs unless
    --user names another. All of them read before any is cancelled (a cancel moves a job out of
    the pages being read)."""
    states = [state.strip().lower() for state in args.state or CANCELLABLE_STATES]
    wrong = [state for state in states if state not in CANCELLABLE_STATES]
    if wrong:
        raise UsageError(f"--state {wrong[0]}: a job that is {wrong[0]} cannot be cancelled; "
                       f"give {' or '.join(CANCELLABLE_STATES)}")
    if args.name is not None and not args.name.strip():
        raise UsageError("--name is empty: give the jobs' name")
    user = args.user.strip() if args.user else None
    if args.user is not None and not user:
        raise UsageError("--user is empty: give a user")
    params: dict[str, Any] = {"state": states, "user": user or account.my_username(api), "limit": LARGEST_PAGE,
                              "ordering": "id"}
    if args.name:
        params["name_exact"] = args.name.strip()
    return [j["id"] for page in api.pages("jobs/", params) for j in page["results"]]


def cmd_hold(api: Api, args: argparse.Namespace) -> int:
    """Hold (`qm hold`) or release (`qm release`) each job named, or every waiting task of an
    array: as `scontrol hold/release`. Every job named is read first: one that is not the
    caller's, not waiting, or (a release) under an admin's hold a member may not release holds
    or releases none, each named."""
    return _act_on_jobs(api, args, args.command)


def cmd_requeue(api: Api, args: argparse.Namespace) -> int:
    """Requeue each job named (`scontrol requeue`; --hold: `scontrol requeuehold`), or every
    running task of an array (--states: the tasks in those states instead): a running job's
    processes get its class's grace period, then it waits again with the same id (held with
    --hold); an ended job waits again at once. Every job named is read first: one that is not the
    caller's, or that cannot be requeued as it stands (`_why_not`), requeues none, each named."""
    if args.states is not None and not args.array:
        raise UsageError("--states picks an array's tasks: give it with --array ARRAY_ID")
    return _act_on_jobs(api, args, "requeue")


def _act_on_jobs(api: Api, args: argparse.Namespace, verb: str) -> int:
    """POST `jobs/{id}/{verb}/` for each job named (once, however often it is named), or
    `job-arrays/{id}/{verb}/` once for an array. Every id's form is checked before any job is touched (a typo among them acted on the
    jobs before it and not those after), and every job is read first (`_refuse_unless_all_can`);
    one refused at its action (it changed since the read, or, a requeue, the API judges it
    further) is an error line on standard error and the others still act. --json: the API's answer for one job; for several, one JSON list of the
    answers of the jobs acted on."""
    if args.array:
        if args.jobs:
            raise UsageError("give job ids or --array, not both")
        return _act_on_array(api, args, verb)
    if not args.jobs:
        raise UsageError(f"name the jobs to {verb} (qm {verb} 412 413), or --array ARRAY_ID")
    # Each job once, in the order first named: a job named twice (a list pasted twice) was acted
    # on, then refused ("already ended: cancelled"), and the command exited 1 having done as asked.
    ids = list(dict.fromkeys(arguments.job_id(job, f"qm {verb} --array") for job in args.jobs))
    _refuse_unless_all_can(api, ids, verb)
    body = _action_body(args)
    failed, results = 0, []
    for job_id in ids:
        try:
            result = api.request("POST", f"jobs/{job_id}/{verb}/", body=body)
        except ApiError as error:
            # Line by line, as main prints an error: a 400's fields each on a line of their own.
            said = "\n".join(output.visible(line) for line in str(refusal(error, args, ACTION_FLAGS)).split("\n"))
            # "Job 5 is running: …", "No job 5, or not yours to see.": the job is named already
            named = re.match(rf"(No job|Job) {job_id}\b", said) is not None
            print(f"error: {said}" if named else f"error: job {job_id}: {said}", file=sys.stderr)
            failed += 1
            continue
        results.append(result)
        if not args.json:
            output.note(result["detail"])
    if args.json and len(ids) > 1:
        output.emit_json(results)
    elif args.json and results:
        output.emit_json(results[0])
    return 1 if failed else 0


#: The ids read in one request before acting: a page's worth (`?id=` of 1,000 ids is a 7 kB URL).
_IDS_A_READ = LARGEST_PAGE

#: What `qm cancel`, `hold`, `release` and `requeue` did to a job, for "nothing held".
_DONE = {"cancel": "cancelled", "hold": "held", "release": "released", "requeue": "requeued"}


def _refuse_unless_all_can(api: Api, ids: list[int], verb: str) -> None:
    """Every job named read before any is cancelled, held, released or requeued (one `GET
    jobs/?id=...` a thousand ids): one that does not exist or is not the caller's to see, or that
    `verb` cannot act on as it stands (`_why_not`), changes nothing, each named on a line of its
    own. `qm cancel 48 53 99999` cancelled 48 and 53 and then said "No job 99999"; `qm hold`, `qm
    release` and `qm requeue` did the same until 7 Dec. A job that changes between this read and
    its action is still an error line of its own after the others act: the read does not lock
    the jobs. So is an ended job whose requeue the API refuses for what the read does not show
    (submitted again as it is, it would be refused now: its class's limit lowered, its GPU type
    gone)."""
    found: dict[int, dict[str, Any]] = {}
    for start in range(0, len(ids), _IDS_A_READ):
        chunk = ids[start:start + _IDS_A_READ]
        page = api.request("GET", "jobs/", params={"id": ",".join(map(str, chunk)), "limit": LARGEST_PAGE})
        found.update((job["id"], job) for job in page["results"])
    done = _DONE[verb]
    if not found and account.reads_no_jobs(api):  # shown no job: "No job N" of jobs that are there
        raise CliError(f"Finance accounts read showback and costs; they cannot {verb} jobs: nothing {done}.")
    # Only an admin releases an admin's hold: asked once, and only when one is named.
    admin = (verb == "release" and any(job.get("hold") == "admin" for job in found.values())
             and bool(api.request("GET", "auth/me/").get("is_admin")))
    wrong = []
    named = list(dict.fromkeys(ids))
    for job_id in named:
        job = found.get(job_id)
        said = f"No job {job_id}, or not yours to see." if job is None else _why_not(job, verb, admin)
        if said:
            wrong.append(said)
    if not wrong:
        return
    for said in wrong[:-1]:  # one line each, as _act_on_jobs prints a refused job
        print(f"error: {output.visible(said)}", file=sys.stderr)
    left = len(named) - len(wrong)
    if not left:  # none of them could be acted on: the refusals say it all
        raise CliError(wrong[-1])
    print(f"error: {output.visible(wrong[-1])}", file=sys.stderr)
    raise CliError(f"nothing {done}: the other {'job' if left == 1 else f'{left} jobs'} named "
                   f"{'is' if left == 1 else 'are'} left as {'it was' if left == 1 else 'they were'}")


def _why_not(job: dict[str, Any], verb: str, admin: bool) -> str:
    """Why `verb` cannot act on this job as the read found it, in the API's words; "" if it can.
    A cancel takes a waiting or running job; a hold a waiting one (held already too: its
    reason may change); a release a waiting one (not held already too: it changes nothing, as a
    hold of a held job does, so a script releasing a set twice does not fail), an admin's hold by
    an admin only. A requeue: `_why_not_requeue`."""
    job_id, state = job["id"], job["state"]
    if verb == "requeue":
        return _why_not_requeue(job)
    if state in FINISHED_STATES:
        only = "only pending or running jobs can be cancelled" if verb == "cancel" \
            else f"only a waiting job can be {_DONE[verb]}"
        return f"Job {job_id} has already ended ({state.replace('_', ' ')}); {only}."
    if verb == "cancel":
        return ""
    if state == "running":
        return (f"Job {job_id} is running: only a waiting job can be {_DONE[verb]}. To stop it, cancel it "
                f"(qm cancel {job_id}); to run it again later, requeue it held (qm requeue --hold {job_id}).")
    if state != "pending":
        return f"Job {job_id} is being stopped: only a waiting job can be {_DONE[verb]}."
    if verb == "release" and job["hold"] == "admin" and not admin:
        return (f"Job {job_id} is held by an admin ({job.get('held_by') or 'an account since removed'}): only an "
                "admin may release an admin's hold. Ask an admin to release it.")
    return ""


#: Why a stopping job cannot be requeued, by its state_label: the API's words
#: (services/requeue.py `refusal`), after "Job N is already stopping".
_STOPPING_WHY = {
    "preempting": ": it is being preempted and goes back to the queue by itself when its processes exit.",
    "stopping: resize": (": it is being stopped to resize and goes back to the queue by itself when its processes "
                         "exit."),
    "stopping: requeue": " to be requeued: it goes back to the queue when its processes exit.",
    "stopping: requeue held": " to be requeued: it goes back to the queue held when its processes exit.",
    "stopping: cancelled": (": it is being cancelled and ends when its processes exit; requeue it then to run it "
                            "again."),
    "stopping: runtime limit": (" at its runtime limit: it ends timed out when its processes exit; requeue it then "
                                "to run it again."),
}

#: The upstream states that mean a dependency's condition can never be met now: the rule of
#: services/dependencies/conditions.py `never_met` (afterok on a job that ended otherwise,
#: afternotok on one that succeeded), as the read gives each dependency's upstream state.
_NEVER_MET = {"afterok": {"failed", "cancelled", "timed_out", "unschedulable"}, "afternotok": {"succeeded"}}

#: An upstream's end for "job 9 failed, so afterok on it can never be met".
_ENDED_AS = {"failed": "failed", "cancelled": "was cancelled", "timed_out": "timed out",
             "unschedulable": "can never run", "succeeded": "succeeded"}


def _why_not_requeue(job: dict[str, Any]) -> str:
    """Why `qm requeue` cannot act on this job as the read found it, in the API's words
    (services/requeue.py); "" if it can. A running job may be requeued; an ended one unless it
    still holds GPUs (its processes not yet confirmed gone) or a dependency of it can never be met
    any more (it would wait for ever); not a waiting one, a stopping one, nor one that can never
    run."""
    job_id, state = job["id"], job["state"]
    if state == "running":
        return ""
    if state == "pending":
        held = f" It is held: release it when it may start (qm release {job_id})." if job.get("hold") else ""
        return f"Job {job_id} is waiting already: only a running or ended job can be requeued.{held}"
    if state == "unschedulable":
        return (f"Job {job_id} never ran: as asked, this fleet can never run it, so requeueing it would not run it; "
                "change what it asks for and submit it again.")
    if state not in FINISHED_STATES:
        why = _STOPPING_WHY.get(job.get("state_label") or "", ": it ends when its processes exit.")
        return f"Job {job_id} is already stopping{why}"
    if job.get("gpus_held"):
        return (f"Job {job_id} has ended ({state.replace('_', ' ')}) but is still stopping: it holds its GPUs until "
                "its agents confirm its processes are gone (or its node is fenced). Requeue it once it has.")
    unmet = [d for d in job.get("dependencies") or () if d.get("satisfied_at") is None]
    doomed = [d for d in unmet if d.get("state") in _NEVER_MET.get(d.get("condition") or "", ())]
    if doomed and (job.get("dependency_mode") != "any" or len(doomed) == len(job.get("dependencies") or ())):
        why = "; ".join(f"job {d['job']} {_ENDED_AS.get(d['state'], d['state'])}, so {d['condition']} on it can "
                        "never be met" for d in doomed)
        return (f"Job {job_id} cannot be requeued: {why}; it would wait for ever. Requeue that job first, or submit "
                "this one again without that dependency.")
    return ""


def _act_on_array(api: Api, args: argparse.Namespace, verb: str) -> int:
    """Act on every task of an array in one request (`POST job-arrays/{id}/{verb}/`, as
    `scancel ARRAY_ID`): one line for the lot. Tasks that finished or began stopping meanwhile
    are counted apart, not as failures. One request per task took 24 s for 1,000 tasks, minutes
    for 10,000. --json: the API's answer."""
    array_id = arguments.array_id(args.array)
    answer = api.request("POST", f"job-arrays/{array_id}/{verb}/", body=_action_body(args))  # 404: none, or not yours
    output.say_answer(answer, args.json)
    return 0


def _action_body(args: argparse.Namespace) -> dict[str, Any] | None:
    """`qm hold --reason TEXT`, `qm requeue --hold --reason TEXT`: the action's body; the other
    actions send none."""
    body: dict[str, Any] = {}
    if getattr(args, "requeue_hold", False):
        body["hold"] = True
    reason = getattr(args, "reason", None)
    if reason is not None:
        body["reason"] = reason
    states = getattr(args, "states", None)
    if states is not None:  # qm requeue --array ID --states failed,timed_out
        body["states"] = [state.strip() for state in states.split(",") if state.strip()]
    return body or None

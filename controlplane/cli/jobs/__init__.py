"""`qm`'s job commands: a job from its submit to its output, a module a command (main.py reads
the command line and calls them):

- submit.py: `qm submit`, its job from specs.py (the flags over a YAML file's fields, spec_files.py);
- dependencies.py: `--dependency` as submit and update take it, and a job's as qm says them;
- listing.py: `qm list` (`squeue`); status.py: `qm status`; explain.py: `qm explain`;
  gpus.py and waiting.py: what the two say of a job's GPUs and of its wait;
- actions.py: `qm cancel` (`scancel`), `qm hold`, `qm release`, `qm requeue`;
- update.py: `qm update`;
- events.py: `qm events`; runs.py: `qm runs`; logs.py: `qm logs`;
- states.py: the job states they name.
"""

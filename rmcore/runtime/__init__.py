"""Around a run: what its directory holds (``checkpoints``), the jobs that run it (``jobs``:
submitit, accelerate launch) and its W&B logging (``wandb_log``)."""

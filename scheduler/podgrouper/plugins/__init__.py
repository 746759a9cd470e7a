"""Built-in groupers, one module per workload kind; importing registers them."""

from . import deployment, grove, job, jobset, leaderworkerset, mpijob, pod, pytorchjob

__all__ = ["deployment", "grove", "job", "jobset", "leaderworkerset", "mpijob", "pod",
           "pytorchjob"]

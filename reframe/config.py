# ReFrame site configuration for the himeno checks (reframe/himeno.py).
#
# Two systems:
#   local     this machine: the `local` scheduler, Open MPI's `mpirun`
#             (oversubscribed and allowed as root, as a small test box
#             needs), one job at a time so that runs do not share cores;
#   vcluster  the virtual Slurm cluster of scripts/local-cluster.sh: the
#             `squeue` scheduler (no accounting needed; made robust to a
#             failed squeue, below), `srun` with the PMIx plugin Debian's
#             Open MPI speaks, 2 hosts of 2 CPUs.
# Pick one with `--system local` or `--system vcluster` (both match any
# host name). A centre copies the check and writes its own systems.

import re

import reframe.utility.osext as osext
from reframe.core.backends import register_scheduler
from reframe.core.logging import getlogger
from reframe.core.schedulers.slurm import SqueueJobScheduler


@register_scheduler('squeue-checked')
class CheckedSqueueScheduler(SqueueJobScheduler):
    '''ReFrame's `squeue` scheduler, except that a failed squeue is no
    answer. The stock one takes every job that squeue does not list as
    completed, also when squeue itself failed (a controller slow to answer
    on a loaded machine: "Socket timed out"), and the sanity check then
    reads the output of a job still running. Here a failed query leaves
    every state as it was, and the next poll asks again; "Invalid job id"
    (a job the controller has forgotten, so long finished) still means
    completed.'''

    def poll(self, *jobs):
        jobs = [job for job in jobs if job is not None]
        if not jobs:
            return
        ids = ','.join(job.jobid for job in jobs)
        query = osext.run_command(f'squeue -h -j {ids} -o "%i|%T|%N|%r"')
        if query.returncode != 0 and 'Invalid job id' not in query.stderr:
            getlogger().warning(
                f'squeue failed (exit {query.returncode}), asking again: '
                f'{query.stderr.strip()}'
            )
            return
        listed = {}
        for line in query.stdout.splitlines():
            fields = line.split('|', 3)
            if len(fields) == 4:
                # Array elements ("12_3") belong to their job.
                listed.setdefault(re.split(r'[_+]', fields[0])[0], []).append(fields)
        for job in jobs:
            rows = listed.get(job.jobid)
            if rows is None:
                job._state = 'CANCELLED' if job.is_cancelling else 'COMPLETED'
                continue
            job._state = ','.join(r[1] for r in rows)
            job._nodespec = ','.join(r[2] for r in rows)
        self._cancel_if_blocked(
            jobs, {jobid: [r[3] for r in rows] for jobid, rows in listed.items()}
        )
        self._cancel_if_pending_too_long(jobs)


site_configuration = {
    'systems': [
        {
            'name': 'local',
            'descr': 'this machine, ranks started by mpirun',
            'hostnames': ['.*'],
            'modules_system': 'nomod',
            'partitions': [
                {
                    'name': 'cpu',
                    'descr': 'CPU ranks under mpirun',
                    'scheduler': 'local',
                    'launcher': 'mpirun',
                    'environs': ['plain'],
                    'max_jobs': 1,
                    'env_vars': [
                        ['OMPI_ALLOW_RUN_AS_ROOT', '1'],
                        ['OMPI_ALLOW_RUN_AS_ROOT_CONFIRM', '1'],
                        ['OMPI_MCA_rmaps_base_oversubscribe', '1'],
                        ['OMPI_MCA_mpi_yield_when_idle', '1'],
                    ],
                    'extras': {'tasks_per_node': 0},
                },
            ],
        },
        {
            'name': 'vcluster',
            'descr': 'the virtual Slurm cluster of scripts/local-cluster.sh',
            'hostnames': ['.*'],
            'modules_system': 'nomod',
            'partitions': [
                {
                    'name': 'cpu',
                    'descr': '2 hosts of 2 CPUs, ranks started by srun',
                    'scheduler': 'squeue-checked',
                    'launcher': 'srun',
                    'environs': ['plain'],
                    'max_jobs': 2,
                    'time_limit': '5m',
                    'env_vars': [
                        ['SLURM_MPI_TYPE', 'pmix'],
                        ['OMPI_MCA_mpi_yield_when_idle', '1'],
                    ],
                    'extras': {'tasks_per_node': 2},
                },
            ],
        },
    ],
    # Logs go to the terminal only (ReFrame's default also leaves a file
    # in /tmp per session); the performance logs stay under the prefix.
    'logging': [
        {
            'handlers': [
                {'type': 'stream', 'name': 'stdout', 'level': 'info',
                 'format': '%(message)s'},
            ],
            'handlers_perflog': [
                {'type': 'filelog', 'prefix': '%(check_system)s/%(check_partition)s',
                 'level': 'info',
                 'format': '%(check_job_completion_time)s|%(check_display_name)s|'
                           '%(check_perfvalues)s',
                 'format_perfvars': '%(check_perf_var)s=%(check_perf_value)s '
                                    '%(check_perf_unit)s|',
                 'append': True},
            ],
        },
    ],
    'environments': [
        {
            'name': 'plain',
            'cc': 'cc',
            'cxx': '',
            'ftn': '',
        },
    ],
}

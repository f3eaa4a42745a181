# ReFrame site configuration for the himeno checks (reframe/himeno.py).
#
# Two systems:
#   local     this machine: the `local` scheduler, Open MPI's `mpirun`
#             (oversubscribed and allowed as root, as a small test box
#             needs), one job at a time so that runs do not share cores;
#   vcluster  the virtual Slurm cluster of scripts/local-cluster.sh: the
#             `squeue` scheduler (no accounting needed), `srun` with the
#             PMIx plugin Debian's Open MPI speaks, 2 hosts of 2 CPUs.
# Pick one with `--system local` or `--system vcluster` (both match any
# host name). A centre copies the check and writes its own systems.

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
                    'scheduler': 'squeue',
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

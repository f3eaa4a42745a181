# ReFrame checks of the himeno benchmark (https://reframe-hpc.readthedocs.io).
#
# Run-only checks of the `himeno` on PATH, or the binary HIMENO_BIN names:
#   himeno_check      classic iterations and temporal blocking (--temporal 4)
#                     on 1, 2 and 4 ranks;
#   himeno_gpu_check  GPU ranks, on partitions with the feature `gpu` only.
# Sanity is the run's own verification verdict (every rank's own exit status
# 0 and "verified": true, checked against the reference kernel), with the
# launcher's status (mpirun, srun) told apart from himeno's: each rank runs
# under a small sh wrapper that reports the rank's status on a line of its
# own, so that a launcher's failure is never taken for himeno's, nor the
# reverse; performance: MFLOPS, effective
# GB/s (56 bytes per point) and the communication fraction of the slowest
# rank, read from the JSON report; where the run measured its energy (a
# node with RAPL, Cray pm_counters or NVML counters, docs/energy.md), also
# the timed loop's joules and GFLOPS per watt.
#
# References come from a file of your own (JSON, see references.example.json
# and docs/operations.md, "ReFrame"): HIMENO_REFERENCES=FILE or `-S references_file=FILE`.
# Without one, the values are recorded in the perflog and not judged.
# reframe/record_references.py turns a run report into such a file.

import json
import os
import re
import shlex
import shutil
import stat

import reframe as rfm
import reframe.utility.sanity as sn
from reframe.core.builtins import (parameter, performance_function,
                                   run_after, run_before, sanity_function,
                                   variable)

# Units of the performance variables, also the units a references file
# must give.
UNITS = {'mflops': 'MFLOPS', 'gbytes_per_s': 'GB/s', 'comm_fraction': '',
         'energy': 'J', 'gflops_per_w': 'GFLOPS/W'}

# The job's figures in the report's `energy` object (two more spaces than
# the top level; a node's, deeper in its `nodes` list, are not matched).
ENERGY_NUMBER = r'\n    "{key}": ([-+0-9.eE]+)'


@sn.deferrable
def worst_status(statuses):
    '''The highest exit status the ranks reported; 0 when none did.'''
    return max(statuses, default=0)


# What every rank runs: himeno ($0) with its options, then its own exit
# status on a line of its own. Under a launcher, the launcher's status is
# its own: a rank killed, one never started, or the launcher failing after
# every rank ended well.
RANK_WRAPPER = '"$0" "$@"; s=$?; echo "himeno rank exit status: $s"; exit $s'

# The launcher's status, echoed by the job script after it returns.
LAUNCHER_STATUS = r'^launcher exit status: (\d+)$'

# One rank's own status, from RANK_WRAPPER.
RANK_STATUS = r'^himeno rank exit status: (\d+)$'


# Largest references file read (as record_references.py's inputs).
MAX_REFERENCES_BYTES = 64 << 20


def read_references(path):
    '''The JSON object of the references file at `path`, read as himeno
    reads files a user names: a regular file only (a FIFO is opened without
    blocking and refused, as is a device or a directory), at most 64 MiB.'''
    def refuse(why):
        return ValueError(f'cannot read the references file {path}: {why}')
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as e:
        raise refuse(e.strerror) from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise refuse('it is not a regular file')
    with os.fdopen(fd, 'rb') as f:
        data = f.read(MAX_REFERENCES_BYTES + 1)
    if len(data) > MAX_REFERENCES_BYTES:
        raise refuse(f'it holds more than {MAX_REFERENCES_BYTES >> 20} MiB')
    try:
        refs = json.loads(data)
    except (ValueError, RecursionError) as e:
        raise refuse(f'it is not JSON ({e})') from None
    if not isinstance(refs, dict):
        raise refuse('it is not a JSON object')
    return refs


def json_number(key, stdout):
    '''A top-level number of the pretty-printed JSON report.'''
    return sn.extractsingle(rf'\n  "{key}": ([-+0-9.eE]+)', stdout, 1, float)


class himeno_base(rfm.RunOnlyRegressionTest):
    '''What every himeno check shares: the binary, the options, the sanity
    and performance functions, and the references from a file.'''

    valid_prog_environs = ['*']
    size = variable(str, value='S')
    iterations = variable(int, value=20)
    references_file = variable(str, value=os.environ.get('HIMENO_REFERENCES', ''))
    extra_opts = variable(list, value=[])
    maintainers = ['himeno']
    tags = {'benchmark', 'himeno'}

    #: The key of this check in a references file (e.g. "classic-4"), set
    #: from the parameters; it is in the run report for record_references.
    ref_key = variable(str, value='')

    @run_after('init')
    def find_binary(self):
        # The launcher starts the wrapper, which runs himeno (see
        # RANK_WRAPPER and set_options).
        self.executable = 'sh'
        self.num_tasks = self.ranks
        self.ref_key = self.reference_key()

    @run_before('run')
    def set_options(self):
        opts = [
            '--size', self.size, '--iterations', str(self.iterations),
            '--verify', '--format', 'json', *self.backend_opts(),
            *self.extra_opts,
        ]
        binary = os.environ.get('HIMENO_BIN') or shutil.which('himeno')
        # ReFrame joins these into the job script as they are: quoted here.
        self.executable_opts = [
            '-c', shlex.quote(RANK_WRAPPER), shlex.quote(binary or 'himeno'),
            *(shlex.quote(str(o)) for o in opts),
        ]
        # The launcher's exit status, also where the scheduler cannot tell
        # a job's (`squeue` without accounting).
        self.postrun_cmds = ['echo "launcher exit status: $?"']
        # Where the job ran, in its own output: a scheduler that polls
        # squeue (no accounting) learns a job's nodes only if a poll finds
        # it running, which a short job can finish between.
        self.prerun_cmds = [
            'echo "himeno job nodes: ${SLURM_JOB_NODELIST:-$(hostname)}"'
        ]
        per_node = self.current_partition.extras.get('tasks_per_node', 0)
        if per_node:
            self.num_tasks_per_node = min(per_node, self.num_tasks)

    @run_before('performance')
    def set_references(self):
        if not self.references_file:
            return
        refs = read_references(self.references_file)
        key = self.ref_key
        self.reference = {
            system: {name: tuple(v) for name, v in checks[key].items()}
            for system, checks in refs.items() if key in checks
        }

    @sanity_function
    def verified(self):
        # In order: the job ran to its end, himeno's status where a rank
        # reported one (1 is a wrong answer, 2 an error, said on its
        # stderr), every rank reported its own status, the launcher's, the
        # verdict. A rank's failure comes before the count: a launcher
        # ends the other ranks once one exits non-zero, often before they
        # report theirs.
        launcher = sn.extractsingle(LAUNCHER_STATUS, self.stdout, 1, int)
        ranks = sn.extractall(RANK_STATUS, self.stdout, 1, int)
        return sn.all([
            sn.assert_found(LAUNCHER_STATUS, self.stdout,
                            msg='no exit status in the job\'s output: the job '
                                'was killed, or the scheduler said it ended '
                                'while it ran'),
            sn.assert_eq(worst_status(ranks), 0,
                         msg='himeno exited with status {0}, not 0 '
                             '(its stderr says why)'),
            sn.assert_eq(sn.count(ranks), self.num_tasks,
                         msg='{0} of {1} himeno ranks reported their exit '
                             'status: the launcher did not start the others '
                             'or they were killed (the launcher\'s status '
                             'is in the job\'s output, its stderr says why)'),
            sn.assert_eq(launcher, 0,
                         msg='the launcher exited with status {0} although '
                             'every himeno rank exited 0 (its stderr says '
                             'why)'),
            sn.assert_found(r'\n  "verified": true', self.stdout,
                            msg='the run did not verify its answer'),
        ])

    @run_before('performance')
    def add_energy_variables(self):
        '''Energy (J) and GFLOPS/W as performance variables when the
        report has them: a run without energy counters, or whose loop was
        too short for them, has none, and is not judged on them.'''
        path = os.path.join(self.stagedir, str(sn.evaluate(self.stdout)))
        try:
            with open(path, encoding='utf-8', errors='replace') as f:
                text = f.read()
        except OSError:
            return
        for name, key in (('energy', 'energy_j'), ('gflops_per_w', 'gflops_per_w')):
            pattern = ENERGY_NUMBER.format(key=key)
            if re.search(pattern, text):
                self.perf_variables[name] = sn.make_performance_function(
                    sn.extractsingle(pattern, self.stdout, 1, float), UNITS[name])

    @performance_function('MFLOPS')
    def mflops(self):
        return json_number('mflops', self.stdout)

    @performance_function('GB/s')
    def gbytes_per_s(self):
        return json_number('gbytes_per_s', self.stdout)

    @performance_function('')
    def comm_fraction(self):
        return json_number('comm_share', self.stdout)


@rfm.simple_test
class himeno_check(himeno_base):
    '''CPU ranks: the classic iteration and temporal blocking.'''

    def reference_key(self):
        return f'{self.variant}-{self.ranks}'

    valid_systems = ['*']
    ranks = parameter([1, 2, 4])
    variant = parameter(['classic', 'temporal'])
    descr = 'himeno 19-point Jacobi, CPU ranks'

    def backend_opts(self):
        opts = ['--threads', '1'] if self.ranks > 1 else []
        if self.variant == 'temporal':
            opts += ['--temporal', '4']
        return opts


@rfm.simple_test
class himeno_gpu_check(himeno_base):
    '''GPU ranks (a build with the `cuda` feature), one per device.'''

    def reference_key(self):
        return f'gpu-{self.ranks}'

    valid_systems = ['+gpu']
    ranks = parameter([1, 2])
    size = 'L'
    descr = 'himeno 19-point Jacobi, GPU ranks'

    def backend_opts(self):
        return ['--backend', 'gpu']

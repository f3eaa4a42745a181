#!/usr/bin/env python3
'''Records this machine's values as references for reframe/himeno.py.

Reads a ReFrame run report (`reframe ... -r --report-file REPORT.json`) and
writes (or updates) a references file: for every passed check, per
"system:partition" and check key ("classic-4", "temporal-2", "gpu-1"),
the measured MFLOPS and GB/s as targets that may be --slower lower, and
the communication fraction as a target that may be --comm-above higher.
Use it with HIMENO_REFERENCES=FILE (or `-S references_file=FILE`).

The files it reads follow himeno's rules for files a user names: regular
files only (a FIFO, a device or a directory is refused, never waited on or
read for ever), opened without blocking, at most 64 MiB; --slower is a
fraction from 0 to 1 and --comm-above a finite number from 0 to 1000. Any
other input is one line on stderr and exit status 2.
'''

import argparse
import json
import math
import os
import stat
import sys

# Largest file read: a run report of thousands of checks is a few MiB.
MAX_BYTES = 64 << 20


def fail(message):
    '''One line on stderr, exit status 2.'''
    print(f'record_references: {message}', file=sys.stderr)
    sys.exit(2)


def read_json(path, what):
    '''The JSON of the regular file at `path`, at most MAX_BYTES: a FIFO is
    opened without blocking and refused, as is a device or a directory.'''
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as e:
        fail(f'cannot read the {what} {path}: {e.strerror}')
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        fail(f'cannot read the {what} {path}: it is not a regular file')
    with os.fdopen(fd, 'rb') as f:
        if st.st_size > MAX_BYTES:
            fail(f'cannot read the {what} {path}: it holds more than '
                 f'{MAX_BYTES >> 20} MiB, the most read from it')
        try:
            data = f.read(MAX_BYTES + 1)
        except OSError as e:
            fail(f'cannot read the {what} {path}: {e.strerror}')
    if len(data) > MAX_BYTES:
        fail(f'cannot read the {what} {path}: it grew past {MAX_BYTES >> 20} MiB')
    try:
        return json.loads(data)
    except (ValueError, RecursionError) as e:
        fail(f'cannot read the {what} {path}: it is not JSON ({e})')


class Parser(argparse.ArgumentParser):
    '''argparse with its errors on one line (no usage block), status 2.'''

    def error(self, message):
        fail(message)


def fraction(low, high):
    '''An argparse type: a finite number from `low` to `high`.'''
    def parse(text):
        try:
            x = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f'{text!r} is not a number')
        if not (math.isfinite(x) and low <= x <= high):
            raise argparse.ArgumentTypeError(
                f'{text!r} is not a finite number from {low:g} to {high:g}')
        return x
    return parse


def number(value):
    '''A measured value of the report: a finite number, or None.'''
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return value if math.isfinite(value) else None


def entries(report, slower, comm_above):
    '''(system:partition, key, metric, reference) of every passed check.'''
    for run in report.get('runs', []):
        for case in run.get('testcases', []):
            key = case.get('ref_key')
            if case.get('result') != 'pass' or not key:
                continue
            where = f"{case['system']}:{case['partition']}"
            for name, values in (case.get('perfvalues') or {}).items():
                metric = name.rsplit(':', 1)[-1]
                value, unit = number(values[0]), values[4]
                if value is None or value < 0:
                    fail(f'the report\'s {name} of {key} is {values[0]!r}, '
                         f'not a measured value')
                if metric == 'comm_fraction':
                    # A fraction near zero (one rank) gets a floor, so that
                    # its upper bound is not zero too.
                    yield where, key, metric, [max(value, 0.01), None, comm_above, unit]
                else:
                    yield where, key, metric, [value, -slower, None, unit]


def main():
    ap = Parser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('report', help='ReFrame run report (JSON, from --report-file)')
    ap.add_argument('--out', required=True, help='references file to write or update')
    ap.add_argument('--slower', type=fraction(0, 1), default=0.3,
                    help='fraction below the measured MFLOPS and GB/s that passes, '
                         '0 to 1 (default 0.3)')
    ap.add_argument('--comm-above', type=fraction(0, 1000), default=1.0,
                    help='fraction above the measured communication fraction that passes, '
                         '0 to 1000 (default 1.0: up to twice it)')
    args = ap.parse_args()
    report = read_json(args.report, 'report')
    refs = {}
    if os.path.lexists(args.out):
        refs = read_json(args.out, 'references file')
    if not isinstance(report, dict) or not isinstance(refs, dict):
        fail('the report and the references file must each hold one JSON object')
    n = 0
    try:
        for where, key, metric, ref in entries(report, args.slower, args.comm_above):
            refs.setdefault(where, {}).setdefault(key, {})[metric] = ref
            n += 1
    except (AttributeError, KeyError, IndexError, TypeError) as e:
        fail(f'the report {args.report} is not a ReFrame run report ({e!r})')
    if n == 0:
        fail(f'no passed himeno check with values in {args.report}')
    # A fresh file beside the references, renamed over them when whole.
    tmp = f'{args.out}.{os.getpid()}.tmp'
    try:
        with open(tmp, 'x') as f:
            json.dump(refs, f, indent=2, sort_keys=True)
            f.write('\n')
        os.replace(tmp, args.out)
    except OSError as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        fail(f'cannot write the references file {args.out}: {e.strerror}')
    print(f'record_references: wrote {n} references into {args.out}')


if __name__ == '__main__':
    main()

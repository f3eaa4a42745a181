#!/usr/bin/env python3
'''Records this machine's values as references for reframe/himeno.py.

Reads a ReFrame run report (`reframe ... -r --report-file REPORT.json`) and
writes (or updates) a references file: for every passed check, per
"system:partition" and check key ("classic-4", "temporal-2", "gpu-1"),
the measured MFLOPS and GB/s as targets that may be --slower lower, and
the communication fraction as a target that may be --comm-above higher.
Use it with HIMENO_REFERENCES=FILE (or `-S references_file=FILE`).
'''

import argparse
import json
import os
import sys


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
                value, unit = values[0], values[4]
                if metric == 'comm_fraction':
                    # A fraction near zero (one rank) gets a floor, so that
                    # its upper bound is not zero too.
                    yield where, key, metric, [max(value, 0.01), None, comm_above, unit]
                else:
                    yield where, key, metric, [value, -slower, None, unit]


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('report', help='ReFrame run report (JSON, from --report-file)')
    ap.add_argument('--out', required=True, help='references file to write or update')
    ap.add_argument('--slower', type=float, default=0.3,
                    help='fraction below the measured MFLOPS and GB/s that passes (default 0.3)')
    ap.add_argument('--comm-above', type=float, default=1.0,
                    help='fraction above the measured communication fraction that passes '
                         '(default 1.0: up to twice it)')
    args = ap.parse_args()
    try:
        with open(args.report) as f:
            report = json.load(f)
    except (OSError, ValueError) as e:
        sys.exit(f'record_references: cannot read the report {args.report}: {e}')
    refs = {}
    if os.path.exists(args.out):
        with open(args.out) as f:
            refs = json.load(f)
    n = 0
    for where, key, metric, ref in entries(report, args.slower, args.comm_above):
        refs.setdefault(where, {}).setdefault(key, {})[metric] = ref
        n += 1
    if n == 0:
        sys.exit(f'record_references: no passed himeno check with values in {args.report}')
    with open(args.out, 'w') as f:
        json.dump(refs, f, indent=2, sort_keys=True)
        f.write('\n')
    print(f'record_references: wrote {n} references into {args.out}')


if __name__ == '__main__':
    main()

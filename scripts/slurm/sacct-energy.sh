#!/usr/bin/env bash
# Slurm's own energy figure for a job, printed beside himeno's: the job
# templates run it at the end of the job, where it prints
#   sacct -j JOBID --format=JobID,ConsumedEnergy
# for the job and its steps. Where the site collects no energy
# (AcctGatherEnergyType none: every figure empty or 0), where sacct is
# missing or fails, or without a job ID, it says nothing and exits 0: it
# never fails a job. himeno's records hold their own energy, measured over
# each timed loop (docs/energy.md); Slurm's covers whole steps, start-up
# and verification included, so the two are compared, not merged.
# With --append RESULTS it also appends to the results file one line per
# step with a figure,
#   {"kind":"slurm-energy","job_id":"123","step_id":"0","consumed_energy_j":1234}
# (sacct's JobIDRaw, which is SLURM_JOB_ID even in an array job, and
# ConsumedEnergyRaw, joules), which `himeno report` sets beside the records
# of the same job and step. The lines are appended under the lock himeno
# takes to append records (flock(2) on the file, through util-linux's
# flock), starting on a fresh line when the file ends in a torn one, as
# himeno does; without flock, or when the file cannot be written, it says
# so on stderr and appends nothing.
# Usage: scripts/slurm/sacct-energy.sh [--append RESULTS] JOBID
set -uo pipefail
results=
case ${1:-} in
  -h|--help) awk 'NR > 1 && /^#( |$)/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"; exit 0 ;;
  --append) results=${2:-}; shift 2 2> /dev/null || shift $# ;;
esac
[[ -n ${1:-} ]] || exit 0
command -v sacct > /dev/null || exit 0
table=$(sacct -j "$1" --format=JobID,ConsumedEnergy --parsable2 --noheader 2> /dev/null) || exit 0
# Any step with a figure above zero (e.g. 12.34K, 1500)?
awk -F'|' '$2 != "" && $2 !~ /^0+(\.0+)?[KMGT]?$/ { found = 1 } END { exit !found }' <<< "$table" || exit 0
echo "Slurm's ConsumedEnergy (whole steps; himeno's records hold each timed loop's):"
sacct -j "$1" --format=JobID,ConsumedEnergy 2> /dev/null || true
[[ -n $results ]] || exit 0

# The steps' lines: JOB.STEP with a whole number of joules above zero. The
# job's own line (no step) and IDs with other characters are left out.
raw=$(sacct -j "$1" --format=JobIDRaw,ConsumedEnergyRaw --parsable2 --noheader 2> /dev/null) || exit 0
lines=$(awk -F'|' -v kind=slurm-energy '
  $1 ~ /^[0-9A-Za-z_+]+\.[0-9A-Za-z_]+$/ && $2 ~ /^[0-9]+$/ && $2 + 0 > 0 {
    dot = index($1, ".")
    printf "{\"kind\":\"%s\",\"job_id\":\"%s\",\"step_id\":\"%s\",\"consumed_energy_j\":%s}\n",
      kind, substr($1, 1, dot - 1), substr($1, dot + 1), $2 + 0
  }' <<< "$raw")
[[ -n $lines ]] || exit 0
command -v flock > /dev/null || { echo "sacct-energy.sh: no flock command: Slurm's figures are not kept in $results" >&2; exit 0; }
if [[ -e $results && ! -f $results ]]; then
  echo "sacct-energy.sh: $results is not a regular file: Slurm's figures are not kept" >&2
  exit 0
fi
# One printf of all the lines, on the file opened for appending, under the
# lock: no record of a concurrent himeno can come between them.
if ! (
  exec 9>> "$results" || exit 1
  flock -w 60 9 || exit 1
  lead=
  [[ -s $results && $(tail -c 1 "$results" | od -An -tx1) != *0a* ]] && lead=$'\n'
  printf '%s%s\n' "$lead" "$lines" >&9
) 2> /dev/null; then
  echo "sacct-energy.sh: cannot append Slurm's figures to $results" >&2
fi
exit 0

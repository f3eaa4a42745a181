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
# Usage: scripts/slurm/sacct-energy.sh JOBID
set -uo pipefail
case ${1:-} in
  -h|--help) awk 'NR > 1 && /^#( |$)/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"; exit 0 ;;
  '') exit 0 ;;
esac
command -v sacct > /dev/null || exit 0
table=$(sacct -j "$1" --format=JobID,ConsumedEnergy --parsable2 --noheader 2> /dev/null) || exit 0
# Any step with a figure above zero (e.g. 12.34K, 1500)?
awk -F'|' '$2 != "" && $2 !~ /^0+(\.0+)?[KMGT]?$/ { found = 1 } END { exit !found }' <<< "$table" || exit 0
echo "Slurm's ConsumedEnergy (whole steps; himeno's records hold each timed loop's):"
sacct -j "$1" --format=JobID,ConsumedEnergy 2> /dev/null || true
exit 0

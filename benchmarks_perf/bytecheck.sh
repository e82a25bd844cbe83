#!/usr/bin/env bash
# Same jobs, two source trees, output bytes compared: a refactor that claims "outputs unchanged" runs this.
# Usage: benchmarks_perf/bytecheck.sh OLD_SRC NEW_SRC   (e.g. OLD_SRC from `git archive REV src | tar -x -C /tmp/old`)
# Prints ALL SAME, or each job and file that differs. manifest.json records where and by which checkout a run was
# made (environment, resolved paths), so it differs between two trees in different folders; the Parquet tables must not.
set -u
OLD=$(cd "$1" && pwd); NEW=$(cd "$2" && pwd)
REPO=$(cd "$(dirname "$0")/.." && pwd); F=$REPO/tests/fixtures
W=$(mktemp -d "${TMPDIR:-/tmp}/bytecheck.XXXX"); cd "$W" || exit 1
cp "$REPO"/src/lbnorm/data/*.parquet .
export SOURCE_DATE_EPOCH=1700000000
jobs=(
  "run demo_scores.parquet --metadata demo_metadata.parquet --quiet --out"
  "run demo_scores.parquet --no-subtasks --quiet --out"
  "run demo_scores.parquet --sum-memory 0.0001 --quiet --out"
  "run $F/golden/01-ai__Yi-34B-Chat.json $F/golden/AIDC-AI__Marco-o1.json $F/golden/Amu__t1-3B.json --quiet --out"
  "run $F/full_structure --quiet --out"
  "run $F/tables/seed_examples.csv --quiet --out"
  "run $F/tables/seed_examples.jsonl --quiet --out"
  "arena $F/battles/battles.csv --quiet --out"
  "arena $F/battles/battles.csv --bootstrap 20 --seed 1 --quiet --out"
)
i=0; bad=0
for job in "${jobs[@]}"; do
  i=$((i + 1))
  for side in old new; do
    src=$OLD; [ "$side" = new ] && src=$NEW
    # shellcheck disable=SC2086  # the job is words
    PYTHONPATH=$src python -m lbnorm $job "out$i-$side" >"log$i-$side" 2>&1; echo $? >"rc$i-$side"
  done
  if ! cmp -s "rc$i-old" "rc$i-new"; then echo "DIFF exit code: $job"; bad=1; continue; fi
  [ -d "out$i-old" ] || { echo "no output (exit $(cat "rc$i-old")): $job"; continue; }
  for f in "out$i-old"/*.parquet; do
    cmp -s "$f" "out$i-new/$(basename "$f")" || { echo "DIFF $job: $(basename "$f")"; bad=1; }
  done
done
[ $bad = 0 ] && echo "ALL SAME ($i jobs; Parquet tables) in $W"
exit $bad

#!/bin/bash
# The fleet on one GPU node through the queue (docs/deploy.md): single-node.sh, a forced fan-out of the
# SM90 targets, one worker SIGKILLed one second into a job and a replacement started, then fleet_check.py
# until every pair has fresh evidence. Logs and the evidence read back from the API land in $OUT.
[ -n "$PYTHONPATH" ] || source deploy/offline/setup.sh
L=$OUT/e2e; mkdir -p $L
export KERNELWIKI_STALLED_AFTER_S=20 KERNELWIKI_WORKER_HEARTBEAT_S=2 KERNELWIKI_TARGETS='["sm_90","sm_90a","sm_100","sm_100a","sm_103a"]'
export KERNELWIKI_RUNNER_TOKEN=$(python3 -c 'import secrets;print(secrets.token_urlsafe(24))')
S=/tmp/kwnode; rm -rf $S
t_start=$(date +%s.%N)
setsid deploy/single-node.sh --port 8000 --state $S --workers-per-gpu ${WPG:-6} > $L/single-node.out 2>&1 &
NODE=$!
for i in $(seq 240); do grep -q "single-node: ready" $L/single-node.out && break; sleep 0.5; done
cat $L/single-node.out; echo "node ready after $(python3 -c "print(round($(date +%s.%N)-$t_start,1))") s"
export KERNELWIKI_QUEUE_DATABASE_URL=postgresql://postgres@127.0.0.1:5432/kernelwiki_queue KERNELWIKI_DB=postgresql+psycopg://postgres@127.0.0.1:5432/kernelwiki
SINCE=$(date -u +%Y-%m-%dT%H:%M:%SZ); t0=$(date +%s.%N)
$KW jobs --enqueue --force --target sm_90 --target sm_90a 2>&1 | tail -3
# kill one worker in the middle of a job, then start a replacement
for i in $(seq 120); do J=$(grep -o "Starting job [^ ]*\[[0-9]*\]" $S/logs/worker-gpu0-0.log | tail -1); [ -n "$J" ] && break; sleep 0.25; done
sleep 1; VPID=$(cat $S/worker-gpu0-0.pid); echo "killing worker pid $VPID during: $J"; kill -9 $VPID
JID=$(echo "$J" | grep -o "\[[0-9]*\]" | tr -d '[]'); echo "killed job id $JID"
CUDA_VISIBLE_DEVICES=0 $KW worker --target sm_90 --target sm_90a > $S/logs/worker-restarted.log 2>&1 &
python3 deploy/fleet_check.py --server http://127.0.0.1:8000 --target sm_90 --target sm_90a --since $SINCE --timeout ${WAIT:-420} --json $L/pairs.json > $L/fleet_check.out 2>&1; echo "fleet_check rc=$?"
echo "fan-out to last evidence: $(python3 -c "print(round($(date +%s.%N)-$t0,1))") s (polling every 5 s)"
head -3 $L/fleet_check.out; grep -c "^ok" $L/fleet_check.out; grep MISSING $L/fleet_check.out | head
echo "== job $JID in every worker log"; grep -h "verify\[$JID\]\|job $JID " $S/logs/*.log | python3 -c "
import re, sys
for line in sys.stdin:
    head = line[:23]
    m = re.search(r'(Starting job \S+?\[\d+\])', line)
    tail = line[line.find(' ended with status'):] if ' ended with status' in line else ''
    print(head, m.group(1) if m else line[24:200].strip(), tail.strip()[:200])
"
$KW jobs 2>&1 | tail -12
curl -s "http://127.0.0.1:8000/api/snippets?target=sm_90a&limit=200" > $L/snippets.json; curl -s http://127.0.0.1:8000/api/health > $L/health.json
python3 - <<'PY' > $L/evidence.jsonl
import json, os, urllib.request
for s in json.load(open(os.environ["OUT"] + "/e2e/snippets.json"))["snippets"]:
    query = ""
    while query is not None:  # newest first, a window at a time: follow `next`
        page = json.load(urllib.request.urlopen(f"http://127.0.0.1:8000/api/snippets/{s['id']}/evidence?{query}"))
        for r in page["records"]:
            print(json.dumps(r))
        query = page["next"]
PY
wc -l $L/evidence.jsonl
kill -TERM $NODE; sleep 8; cp $S/logs/*.log $L/ 2>/dev/null; tar czf $OUT/e2e-logs.tgz -C $OUT e2e; rm -rf $L

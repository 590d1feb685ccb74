#!/usr/bin/env bash
# 10,000 open streams on one node vs a single hot stream's ack latency.
set -u
BIN=${BIN:-target/release/sluice}
D=$(mktemp -d); HP=$((22000 + RANDOM % 1000)); KP=$((HP+1)); URL=http://127.0.0.1:$HP
$BIN serve --node-id bench --data-dir $D/data --http-addr 127.0.0.1:$HP --kafka-addr 127.0.0.1:$KP --shutdown-drain-sec 0 > $D/log 2>&1 & PID=$!
for i in $(seq 100); do curl -sf $URL/ready >/dev/null && break; sleep 0.1; done
rss() { awk '/VmRSS/{print $2}' /proc/$PID/status; }
cpu() { awk '{print $14+$15}' /proc/$PID/stat; }
echo "rss_start_kib=$(rss)"
$BIN bench produce --url $URL --topic hot --producers 1 --record-bytes 1000 --duration-sec 10 --rate 500 --json 2>/dev/null > $D/base.json
python3 -c "import json;d=json.load(open('$D/base.json'));print('baseline', d['records_per_sec'], d['latency_ms'])"
echo "rss_before_kib=$(rss)"
t0=$(date +%s.%N)
curl -s -XPOST $URL/v1/topics -H 'content-type: application/json' -d '{"name":"many","partitions":10000}' -o /dev/null -w "create %{http_code}\n"
for i in $(seq 600); do
  n=$(curl -s $URL/v1/topics/many | python3 -c "import json,sys;d=json.load(sys.stdin);print(sum(1 for p in d['partition_info'] if p['state']=='open'))")
  [[ $n == 10000 ]] && break; sleep 0.5
done
t1=$(date +%s.%N)
echo "open=$n after $(python3 -c "print(round($t1-$t0,1))") s"
sleep 3
echo "rss_10k_kib=$(rss)"
c0=$(cpu)
sleep 10
c1=$(cpu)
echo "idle_cpu_pct_with_10k=$(python3 -c "print(round(($c1-$c0)/$(getconf CLK_TCK)/10*100,1))")"
$BIN bench produce --url $URL --topic hot --producers 1 --record-bytes 1000 --duration-sec 10 --rate 500 --json 2>/dev/null > $D/hot.json
python3 -c "import json;d=json.load(open('$D/hot.json'));print('with 10k', d['records_per_sec'], d['latency_ms'])"
echo "rss_end_kib=$(rss)"
kill $PID; wait $PID 2>/dev/null; rm -rf $D

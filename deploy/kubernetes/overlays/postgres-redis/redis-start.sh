#!/bin/sh
# Starts one Redis of the StatefulSet redis: as a replica of the primary the Sentinels name, or,
# when none answers (the first start), redis-0 as the primary and the others as its replicas.
# Each announces its stable name (redis-N.redis), so the Sentinels hand the instances names that
# outlive a pod's address.
set -eu
: "${REDIS_PASSWORD:?set REDIS_PASSWORD in the Secret safety-api}"
me="${HOSTNAME:-$(hostname)}.redis"
primary=""
for sentinel in sentinel-0.sentinel sentinel-1.sentinel sentinel-2.sentinel; do
  primary="$(timeout 3 redis-cli -h "$sentinel" -p 26379 --raw sentinel get-master-addr-by-name safety 2>/dev/null | head -n 1)" || primary=""
  [ -n "$primary" ] && break
done
[ -n "$primary" ] || primary=redis-0.redis
set -- --requirepass "$REDIS_PASSWORD" --masterauth "$REDIS_PASSWORD" --save '' --appendonly no \
  --replica-announce-ip "$me"
[ "$primary" = "$me" ] || set -- "$@" --replicaof "$primary" 6379
exec redis-server "$@"

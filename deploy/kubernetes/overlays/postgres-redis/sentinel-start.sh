#!/bin/sh
# Starts one Sentinel of the StatefulSet sentinel. Its configuration (which Sentinel rewrites as it
# learns) is made at its first start, monitoring the primary the other Sentinels name, or redis-0.
set -eu
: "${REDIS_PASSWORD:?set REDIS_PASSWORD in the Secret safety-api}"
config=/data/sentinel.conf
if [ ! -f "$config" ]; then
  primary=""
  for sentinel in sentinel-0.sentinel sentinel-1.sentinel sentinel-2.sentinel; do
    primary="$(timeout 3 redis-cli -h "$sentinel" -p 26379 --raw sentinel get-master-addr-by-name safety 2>/dev/null | head -n 1)" || primary=""
    [ -n "$primary" ] && break
  done
  [ -n "$primary" ] || primary=redis-0.redis
  # A Sentinel refuses to start on a name it cannot resolve: wait for the primary's pod.
  until getent hosts "$primary" >/dev/null; do sleep 1; done
  printf '%s\n' \
    'port 26379' \
    'sentinel resolve-hostnames yes' \
    'sentinel announce-hostnames yes' \
    "sentinel announce-ip ${HOSTNAME:-$(hostname)}.sentinel" \
    "sentinel monitor safety $primary 6379 2" \
    "sentinel auth-pass safety $REDIS_PASSWORD" \
    'sentinel down-after-milliseconds safety 5000' \
    'sentinel failover-timeout safety 30000' >"$config"
fi
exec redis-server "$config" --sentinel

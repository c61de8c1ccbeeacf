#!/bin/sh
# Write /conf/zoo.cfg from the official image's variables, then run the server in the
# foreground with QuorumPeerMain, as the official image's zkServer.sh does: standalone
# without ZOO_SERVERS, a member of an ensemble with them (ZOO_MY_ID, and ZOO_SERVERS as
# "server.1=zookeeper-1:2888:3888;2181 server.2=..."; quill-stack runs the same
# ensemble on bare metal with QUILL_ZK_NODES=3).
set -eu
{
    echo "dataDir=/data"
    echo "dataLogDir=/datalog"
    echo "clientPort=2181"
    echo "tickTime=${ZOO_TICK_TIME:-2000}"
    echo "initLimit=${ZOO_INIT_LIMIT:-5}"
    echo "syncLimit=${ZOO_SYNC_LIMIT:-2}"
    echo "autopurge.snapRetainCount=${ZOO_AUTOPURGE_SNAPRETAINCOUNT:-3}"
    echo "autopurge.purgeInterval=${ZOO_AUTOPURGE_PURGEINTERVAL:-0}"
    echo "maxClientCnxns=${ZOO_MAX_CLIENT_CNXNS:-60}"
    echo "admin.enableServer=${ZOO_ADMINSERVER_ENABLED:-true}"
    echo "4lw.commands.whitelist=${ZOO_4LW_COMMANDS_WHITELIST:-srvr}"
    for item in ${ZOO_CFG_EXTRA:-}; do
        echo "$item"
    done
    if [ -n "${ZOO_SERVERS:-}" ]; then
        # a container's own name resolves to its network address: listen on all of them
        echo "quorumListenOnAllIPs=true"
        for server in $ZOO_SERVERS; do
            echo "$server"
        done
    fi
} > /conf/zoo.cfg
if [ -n "${ZOO_SERVERS:-}" ]; then
    : "${ZOO_MY_ID:?ZOO_SERVERS needs ZOO_MY_ID (this server's number in them)}"
    echo "$ZOO_MY_ID" > /data/myid
fi
cat > /conf/log4j.properties <<'LOG4J'
log4j.rootLogger=INFO, CONSOLE
log4j.appender.CONSOLE=org.apache.log4j.ConsoleAppender
log4j.appender.CONSOLE.layout=org.apache.log4j.PatternLayout
log4j.appender.CONSOLE.layout.ConversionPattern=%d{ISO8601} %-5p [%t:%C{1}@%L] - %m%n
LOG4J
# JVMFLAGS as the official image takes them (the secure profile's JAAS file)
# shellcheck disable=SC2086
exec java -Xms32m -Xmx${ZOO_HEAP_MAX:-256m} -XX:+UseSerialGC -Djava.awt.headless=true ${JVMFLAGS:-} \
    -cp /conf:/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-log4j12.jar:/usr/share/java/log4j-1.2.jar \
    org.apache.zookeeper.server.quorum.QuorumPeerMain /conf/zoo.cfg

#!/bin/sh
# Write /conf/zoo.cfg from the official image's variables, then run a standalone server
# in the foreground (ZooKeeperServerMain, as quill-stack runs it on bare metal).
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
} > /conf/zoo.cfg
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
    org.apache.zookeeper.server.ZooKeeperServerMain /conf/zoo.cfg

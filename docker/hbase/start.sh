#!/usr/bin/env bash
# Start HBase standalone in the background and the Thrift v1 server in the foreground.
set -euo pipefail
opens="--add-opens=java.base/java.lang=ALL-UNNAMED --add-opens=java.base/java.nio=ALL-UNNAMED --add-opens=java.base/sun.nio.ch=ALL-UNNAMED --add-opens=java.base/java.lang.reflect=ALL-UNNAMED --add-exports=java.base/jdk.internal.misc=ALL-UNNAMED -Dorg.apache.hbase.thirdparty.io.netty.tryReflectionSetAccessible=true"
cp="/opt/hbase/conf:/opt/hbase/lib/*"
mkdir -p /data/hbase
java -Xmx2g $opens -Dlog4j2.configurationFile=/opt/hbase/conf/log4j2.properties -cp "$cp" org.apache.hadoop.hbase.master.HMaster start &
exec java -Xmx512m $opens -Dlog4j2.configurationFile=/opt/hbase/conf/log4j2.properties -cp "$cp" \
  org.apache.hadoop.hbase.thrift.ThriftServer -threadpool -p 9090 start

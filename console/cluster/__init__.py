"""How the console reaches the cluster, as any operator tool would: ZooKeeper through
kazoo (zk), the admin APIs through librdkafka (admin), and a few requests sent to one
chosen broker over the Kafka protocol (wire: ListOffsets per leader, DescribeLogDirs)."""

"""ACLs, log dirs and DeleteRecords with kafka-python's KafkaAdminClient (auth off).

Usage: kafka_python_acls_dirs.py BOOTSTRAP TOPIC

Describes and creates ACLs (a server without auth has none: both answer
SECURITY_DISABLED), then describes the log dirs of every broker for TOPIC,
then deletes the records of TOPIC's partition 1 below offset 1 (and past its
end, which is refused) and reads the partition from its beginning.
Prints one JSON line of what the server answered.
"""

import json
import sys

from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition
from kafka.admin._acls import (
    ACL,
    ACLFilter,
    ACLOperation,
    ACLPermissionType,
    ACLResourcePatternType,
    ResourcePattern,
    ResourcePatternFilter,
    ResourceType,
)


def main(bootstrap, topic):
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=20000)
    out = {}
    acl_filter = ACLFilter(
        principal=None,
        host="*",
        operation=ACLOperation.ANY,
        permission_type=ACLPermissionType.ANY,
        resource_pattern=ResourcePatternFilter(ResourceType.TOPIC, None, ACLResourcePatternType.ANY),
    )
    try:
        admin.describe_acls(acl_filter)
        out["describe_acls"] = "ok"
    except Exception as e:  # noqa: BLE001 - the error class is the answer
        out["describe_acls"] = type(e).__name__
    acl = ACL(
        principal="User:alice",
        host="*",
        operation=ACLOperation.READ,
        permission_type=ACLPermissionType.ALLOW,
        resource_pattern=ResourcePattern(ResourceType.TOPIC, topic, ACLResourcePatternType.LITERAL),
    )
    created = admin.create_acls([acl])
    out["create_acls"] = [type(e).__name__ if isinstance(e, Exception) else e.__name__ for e in created["failed"]]
    dirs = admin.describe_log_dirs()
    partitions = {}
    names = set()
    for broker in dirs:
        for d in broker["log_dirs"]:
            names.add(d["log_dir"])
            for t in d["topics"]:
                if t["name"] == topic:
                    for p in t["partitions"]:
                        partitions[p["partition_index"]] = p["partition_size"]
    out["log_dirs"] = sorted(names)
    out["partition_sizes"] = {str(k): v for k, v in sorted(partitions.items())}
    tp = TopicPartition(topic, 1)
    deleted = admin.delete_records({tp: 1}, timeout_ms=20000)
    out["delete_records"] = {str(k.partition): v["low_watermark"] for k, v in deleted.items()}
    try:
        admin.delete_records({tp: 99}, timeout_ms=20000)
        out["delete_past_end"] = "ok"
    except Exception as e:  # noqa: BLE001 - the error class is the answer
        out["delete_past_end"] = type(e).__name__
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, consumer_timeout_ms=10000)
    consumer.assign([tp])
    consumer.seek_to_beginning(tp)
    out["beginning"] = consumer.beginning_offsets([tp])[tp]
    values = []
    for m in consumer:
        values.append((m.offset, m.value.decode()))
        if m.offset >= 1:
            break
    out["read_after_delete"] = values
    consumer.close()
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])

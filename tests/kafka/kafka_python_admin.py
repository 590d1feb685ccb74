"""The admin APIs with kafka-python's KafkaAdminClient.

Usage: kafka_python_admin.py BOOTSTRAP

Creates topics (one with configs, one validate-only, one refused), grows one
with create_partitions, describes and alters its configs (incrementally and
not), describes the cluster, describes the state an idempotent producer left
on a partition, commits and deletes a group's offsets, deletes the topics.
Prints one JSON line of what the server answered; exits non-zero when a call
raises unexpectedly.
"""

import json
import sys

from kafka import KafkaAdminClient, KafkaProducer, TopicPartition
from kafka.admin import ConfigResource, ConfigResourceType
from kafka.errors import (
    GroupIdNotFoundError,
    InvalidConfigurationError,
    InvalidPartitionsError,
    TopicAlreadyExistsError,
)
from kafka.structs import OffsetAndMetadata


def errors(result, key="topics"):
    return {t["name"]: t["error_code"] for t in result[key]}


def configs(admin, topic, config_filter="all"):
    described = admin.describe_configs(
        [ConfigResource(ConfigResourceType.TOPIC, topic)], config_filter=config_filter
    )
    return {k: (v["value"], v["config_source"]) for k, v in described["topic"][topic].items()}


def producers_and_group_offsets(admin, bootstrap, out):
    """DescribeProducers after an idempotent producer wrote to adm2, then
    OffsetDelete of a group without members."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, enable_idempotence=True, acks="all")
    for i in range(3):
        producer.send("adm2", b"v%d" % i)
    producer.flush()
    producer.close()
    tp = TopicPartition("adm2", 0)
    out["producers"] = [
        {
            "id_set": p.producer_id >= 0,
            "epoch": p.producer_epoch,
            "last_sequence": p.last_sequence,
            "last_timestamp": p.last_timestamp,
            "coordinator_epoch": p.coordinator_epoch,
            "txn_start": p.current_transaction_start_offset,
        }
        for p in admin.describe_producers([tp])[tp].active_producers
    ]
    none_yet = TopicPartition("adm", 0)
    admin.alter_group_offsets("adm-g", {tp: OffsetAndMetadata(2, "", -1)})
    before = admin.list_group_offsets({"adm-g": None})["adm-g"]
    out["group_offsets_before"] = {"%s:%d" % (k.topic, k.partition): v.offset for k, v in before.items()}
    deleted = admin.delete_group_offsets("adm-g", [tp, none_yet])
    out["offsets_deleted"] = {"%s:%d" % (k.topic, k.partition): e.__name__ for k, e in deleted.items()}
    after = admin.list_group_offsets({"adm-g": None})["adm-g"]
    out["group_offsets_after"] = {"%s:%d" % (k.topic, k.partition): v.offset for k, v in after.items()}
    try:
        admin.delete_group_offsets("adm-g", [tp])
        out["deleted_again"] = "ok"
    except GroupIdNotFoundError:
        out["deleted_again"] = "GroupIdNotFoundError"


def main(bootstrap):
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=20000)
    out = {}
    created = admin.create_topics(
        {
            "adm": {"num_partitions": 1, "replication_factor": 3, "configs": {"retention.ms": "60000"}},
            "adm2": {},
        }
    )
    out["created"] = errors(created)
    admin.wait_for_topics(["adm", "adm2"], timeout_ms=20000)
    out["validated"] = errors(admin.create_topics({"adm-v": {"num_partitions": 2}}, validate_only=True))
    out["listed"] = sorted(t for t in admin.list_topics() if t.startswith("adm"))
    try:
        admin.create_topics({"adm": {"num_partitions": 1}})
        out["again"] = "created"
    except TopicAlreadyExistsError:
        out["again"] = "TopicAlreadyExistsError"
    compacted = {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.2"}
    out["compact"] = errors(admin.create_topics({"adm-c": {"configs": compacted}}))
    try:
        admin.create_topics({"adm-k": {"configs": {"cleanup.policy": "keep"}}})
        out["bad_policy"] = "created"
    except InvalidConfigurationError:
        out["bad_policy"] = "InvalidConfigurationError"

    admin.create_partitions({"adm": 3})
    admin.wait_for_topics(["adm"], timeout_ms=20000)
    out["partitions"] = len(admin.describe_topics(["adm"])[0]["partitions"])
    try:
        admin.create_partitions({"adm": 2})
        out["shrink"] = "done"
    except InvalidPartitionsError:
        out["shrink"] = "InvalidPartitionsError"

    out["described"] = configs(admin, "adm")
    out["modified"] = configs(admin, "adm", "modified")
    topic = ConfigResource(ConfigResourceType.TOPIC, "adm", {"retention.bytes": "1048576"})
    out["altered"] = admin.alter_configs([topic])
    out["after_alter"] = configs(admin, "adm", "modified")
    # The non-incremental AlterConfigs replaces the whole config; the client
    # carries the other modified keys over itself.
    topic = ConfigResource(ConfigResourceType.TOPIC, "adm", {"retention.ms": "120000"})
    out["altered_legacy"] = admin.alter_configs([topic], incremental=False)
    out["after_legacy"] = configs(admin, "adm", "modified")
    topic = ConfigResource(ConfigResourceType.TOPIC, "adm", ["retention.ms"])
    out["reset"] = admin.reset_configs([topic])
    out["after_reset"] = configs(admin, "adm", "modified")
    out["described_compacted"] = configs(admin, "adm-c", "modified")
    bad = ConfigResource(ConfigResourceType.TOPIC, "adm", {"cleanup.policy": "keep"})
    out["bad_alter"] = admin.alter_configs([bad])["topic"]["adm"].split(":")[0]

    cluster = admin.describe_cluster()
    out["cluster"] = {
        "cluster_id": cluster["cluster_id"],
        "brokers": len(cluster["brokers"]),
        "controller_is_a_broker": cluster["controller_id"] in [b["broker_id"] for b in cluster["brokers"]],
    }

    producers_and_group_offsets(admin, bootstrap, out)

    out["deleted"] = errors(admin.delete_topics(["adm", "adm2", "adm-c"]))
    out["listed_after"] = sorted(t for t in admin.list_topics() if t.startswith("adm"))
    admin.close()
    print(json.dumps(out, sort_keys=True))


if __name__ == "__main__":
    main(sys.argv[1])

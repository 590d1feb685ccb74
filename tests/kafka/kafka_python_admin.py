"""The admin APIs with kafka-python's KafkaAdminClient.

Usage: kafka_python_admin.py BOOTSTRAP

Creates topics (one with configs, one validate-only, one refused), grows one
with create_partitions, describes and alters its configs (incrementally and
not), describes the cluster, deletes the topics. Prints one JSON line of what
the server answered; exits non-zero when a call raises unexpectedly.
"""

import json
import sys

from kafka import KafkaAdminClient
from kafka.admin import ConfigResource, ConfigResourceType
from kafka.errors import InvalidConfigurationError, InvalidPartitionsError, TopicAlreadyExistsError


def errors(result, key="topics"):
    return {t["name"]: t["error_code"] for t in result[key]}


def configs(admin, topic, config_filter="all"):
    described = admin.describe_configs(
        [ConfigResource(ConfigResourceType.TOPIC, topic)], config_filter=config_filter
    )
    return {k: (v["value"], v["config_source"]) for k, v in described["topic"][topic].items()}


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
    try:
        admin.create_topics({"adm-c": {"configs": {"cleanup.policy": "compact"}}})
        out["compact"] = "created"
    except InvalidConfigurationError:
        out["compact"] = "InvalidConfigurationError"

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
    bad = ConfigResource(ConfigResourceType.TOPIC, "adm", {"cleanup.policy": "compact"})
    out["bad_alter"] = admin.alter_configs([bad])["topic"]["adm"].split(":")[0]

    cluster = admin.describe_cluster()
    out["cluster"] = {
        "cluster_id": cluster["cluster_id"],
        "brokers": len(cluster["brokers"]),
        "controller_is_a_broker": cluster["controller_id"] in [b["broker_id"] for b in cluster["brokers"]],
    }

    out["deleted"] = errors(admin.delete_topics(["adm", "adm2"]))
    out["listed_after"] = sorted(t for t in admin.list_topics() if t.startswith("adm"))
    admin.close()
    print(json.dumps(out, sort_keys=True))


if __name__ == "__main__":
    main(sys.argv[1])

"""The S3 tier and `iobench dataset upload` find the endpoint and region as every AWS tool does
(botocore's resolution), not from a fixed list of variables."""

from __future__ import annotations

import pytest

from iobench.datasets.upload import s3_client
from iobench.tiers.s3 import resolve_s3


@pytest.fixture
def aws_config(tmp_path, monkeypatch):
    for var in (
        "AWS_ENDPOINT_URL",
        "AWS_ENDPOINT_URL_S3",
        "S3_ENDPOINT_URL",
        "AWS_REGION",
        "AWS_DEFAULT_REGION",
        "AWS_PROFILE",
    ):
        monkeypatch.delenv(var, raising=False)
    config = tmp_path / "config"
    config.write_text(
        "[profile lab]\nregion = eu-west-3\nendpoint_url = http://rgw.example:7480\n"
        "[profile gw]\nservices = gw-s3\n[services gw-s3]\ns3 =\n  endpoint_url = http://s3only.example:9000\n"
    )
    creds = tmp_path / "credentials"
    creds.write_text("[lab]\naws_access_key_id = AKIDEXAMPLE\naws_secret_access_key = secret\n")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(creds))
    return monkeypatch


def test_a_profiles_endpoint_and_region(aws_config):
    assert resolve_s3(None, None, "lab") == ("http://rgw.example:7480", "eu-west-3")
    assert resolve_s3(None, None, "gw")[0] == "http://s3only.example:9000"  # its services section
    # given beats configured, and the S3-only variable beats the general one
    assert resolve_s3("http://given:1", "us-west-2", "lab") == ("http://given:1", "us-west-2")
    aws_config.setenv("AWS_ENDPOINT_URL", "http://general:1")
    aws_config.setenv("AWS_ENDPOINT_URL_S3", "http://s3:1")
    assert resolve_s3(None, None, None)[0] == "http://s3:1"
    aws_config.delenv("AWS_ENDPOINT_URL_S3")
    assert resolve_s3(None, None, None)[0] == "http://general:1"
    # AWS itself: left to botocore; the lab's old variable as the last resort
    aws_config.delenv("AWS_ENDPOINT_URL")
    assert resolve_s3(None, None, None)[0] is None
    aws_config.setenv("S3_ENDPOINT_URL", "http://old-lab:7480")
    assert resolve_s3(None, None, None)[0] == "http://old-lab:7480"


def test_staging_resolves_the_same_way(aws_config):
    client, endpoint = s3_client(profile="lab")
    assert endpoint == "http://rgw.example:7480" and client.meta.region_name == "eu-west-3"
    with pytest.raises(ValueError, match="--profile nope"):
        s3_client(profile="nope")

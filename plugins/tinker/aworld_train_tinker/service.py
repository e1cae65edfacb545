"""The service: reached in seconds before any training call, and each answer that is not what
this SDK expects turned into one line that names the URL and the fix.

The checks speak HTTP themselves (the SDK retries a dead connection for minutes, and a check
must not): ``healthz`` says the service is up, ``get_server_capabilities`` that it speaks this
protocol, accepts the key and serves the base model.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

from aworld_train.engine import ConfigError, installed_versions

from aworld_train_tinker.config import TinkerJob

# The SDK's own default service, used when neither the job nor TINKER_BASE_URL names one.
CLOUD_URL = "https://tinker.thinkingmachines.dev/services/tinker-prod"


def service_url(job: TinkerJob) -> str:
    return (job.base_url or CLOUD_URL).rstrip("/")


def check_service(job: TinkerJob) -> list[str]:
    """Reach the service and check that it serves ``job.base_model``; returns the models it
    serves.

    :raises ConfigError: one line for an unreachable service, a refused key, a server that does
        not speak this SDK's protocol, or a base model it does not serve.
    """
    url = service_url(job)
    key = job.api_key()
    if key is None:
        raise ConfigError(
            f"tinker service {url}: no API key: set {job.api_key_env} (a local SkyRL tx "
            "server takes any key that starts with 'tml-')"
        )
    if not key.startswith("tml-"):
        raise ConfigError(
            f"tinker service {url}: the API key in {job.api_key_env} does not start with "
            "'tml-', as Tinker keys do; copy the key from the Tinker console"
        )
    health = _get(url, "/api/v1/healthz", key, job.api_key_env, job.connect_timeout)
    if not isinstance(health, dict) or health.get("status") != "ok":
        raise _protocol_error(url, "/api/v1/healthz", f"answered {str(health)[:80]!r}")
    capabilities = _get(
        url, "/api/v1/get_server_capabilities", key, job.api_key_env, job.connect_timeout
    )
    try:
        served = [str(model["model_name"]) for model in capabilities["supported_models"]]
    except (KeyError, TypeError):
        raise _protocol_error(
            url, "/api/v1/get_server_capabilities", "answered without supported_models"
        ) from None
    if job.base_model not in served:
        raise ConfigError(
            f"tinker service {url} does not serve the base model '{job.base_model}' (it serves: "
            f"{', '.join(served) or 'none'}); set tinker.base_model to one of them"
        )
    return served


def _get(url: str, route: str, key: str, key_env: str, timeout: float) -> Any:
    request = urllib.request.Request(url + route, headers={"X-API-Key": key})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            return json.load(answer)
    except urllib.error.HTTPError as exc:
        if exc.code in (401, 403):
            raise ConfigError(
                f"tinker service {url} refused the API key in {key_env} (HTTP {exc.code}); "
                f"set {key_env} to a valid key"
            ) from None
        if exc.code in (404, 405):
            raise _protocol_error(url, route, f"has no such route (HTTP {exc.code})") from None
        raise ConfigError(
            f"tinker service {url}{route} answered HTTP {exc.code}: {exc.reason}"
        ) from None
    except ValueError:
        raise _protocol_error(url, route, "answered something that is not JSON") from None
    except (OSError, urllib.error.URLError) as exc:
        reason = getattr(exc, "reason", exc)
        raise ConfigError(
            f"tinker service {url} is not reachable ({reason}, waited up to {timeout:g} s): "
            "start the server or set tinker.base_url (or TINKER_BASE_URL) to where it runs"
        ) from None


def _protocol_error(url: str, route: str, what: str) -> ConfigError:
    version = installed_versions("tinker").get("tinker", "?")
    return ConfigError(
        f"tinker service {url} does not speak the Tinker API of the tinker SDK {version}: "
        f"{route} {what}; check the URL, or install the SDK version the server speaks "
        "(SkyRL tx 0.3: tinker==0.15.0)"
    )

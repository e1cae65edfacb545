import os
import tempfile

# aworld writes its log files under $AWORLD_LOG_PATH (default: ./logs) as soon as it is
# imported; keep them out of the working tree.
os.environ.setdefault("AWORLD_LOG_PATH", tempfile.mkdtemp(prefix="aworld-logs-"))

"""The inline "training code" the examples run, shared by them: it stands for *your* code, which on a real
cluster lives in your image. Copy this file with an example (Airflow puts the DAG folder on ``sys.path``)."""

#: Train for ``--steps`` steps; commit a checkpoint (a weights file and its metrics) after each step to
#: ``CHECKPOINT_URI``, starting after ``RESUME_FROM``'s step when the operator resolved one.
TRAIN = """
import json, os, sys, time
from airflow_k8s_ml.checkpoints import CheckpointWriter

steps = int(sys.argv[1])
writer = CheckpointWriter(os.environ["CHECKPOINT_URI"])
start = 0
if os.environ.get("RESUME_FROM"):  # ".../step-3/": the newest complete checkpoint, resolved by the operator
    start = int(os.environ["RESUME_FROM"].rstrip("/").rsplit("step-", 1)[1])
    print(f"resuming after step {start}", flush=True)
for step in range(start + 1, steps + 1):
    time.sleep(0.5)  # the work of one step
    accuracy = round(0.5 + 0.1 * step, 3)
    uri = writer.commit(step, {"weights.json": json.dumps({"w": step}).encode()},
                        metrics={"val_accuracy": accuracy})
    print(f"step={step} val_accuracy={accuracy} committed {uri}", flush=True)
"""

#: Score every line of the files under ``INPUT_URI`` with the model at ``MODEL_URI``; write the predictions
#: under ``OUTPUT_URI`` (the operator injects the three variables).
SCORE = """
import json, os
import boto3

s3 = boto3.client("s3")
def split(uri):
    bucket, _, key = uri.removeprefix("s3://").partition("/")
    return bucket, key
bucket, prefix = split(os.environ["INPUT_URI"])
rows = 0
for item in s3.list_objects_v2(Bucket=bucket, Prefix=prefix).get("Contents", []):
    rows += len(s3.get_object(Bucket=bucket, Key=item["Key"])["Body"].read().splitlines())
out_bucket, out_prefix = split(os.environ["OUTPUT_URI"])
summary = {"model": os.environ["MODEL_URI"], "rows": rows}
s3.put_object(Bucket=out_bucket, Key=out_prefix.rstrip("/") + "/_SUMMARY.json", Body=json.dumps(summary))
print("scored", rows, "rows with", os.environ["MODEL_URI"], flush=True)
"""

#: A model server: ``/readyz`` and ``/healthz`` for the probes, ``POST /predict`` answers with the model URI.
SERVE = """
import json, os
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

class Handler(BaseHTTPRequestHandler):
    def _send(self, body):
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
    def do_GET(self):
        self._send({"ok": True})
    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self._send({"prediction": 1, "model": os.environ["MODEL_URI"]})

ThreadingHTTPServer(("0.0.0.0", int(os.environ["PORT"])), Handler).serve_forever()
"""

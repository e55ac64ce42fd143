// Validate Prometheus Operator custom resources against the operator's own schemas.
//
// Kubernetes core kinds are checked in Python with kubernetes-validate (tests/test_deploy.py);
// custom resources are not in those schemas, so this script checks them with the validators that
// @kubernetes-models/prometheus-operator generates from the operator's CRD OpenAPI schemas.
//
// Input: a JSON array of resources on stdin (the Python test converts the YAML).
// Output: one JSON line per resource, {"kind", "name", "ok", "error"}; exit 1 if any failed,
// 2 when a kind is not supported here.
import { PodMonitor } from "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/PodMonitor";
import { PrometheusRule } from "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/PrometheusRule";
import { ServiceMonitor } from "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/ServiceMonitor";

const MODELS = {
  "monitoring.coreos.com/v1/PodMonitor": PodMonitor,
  "monitoring.coreos.com/v1/PrometheusRule": PrometheusRule,
  "monitoring.coreos.com/v1/ServiceMonitor": ServiceMonitor,
};

const chunks = [];
for await (const chunk of process.stdin) chunks.push(chunk);
const resources = JSON.parse(Buffer.concat(chunks).toString("utf8"));

let status = 0;
for (const res of resources) {
  const key = `${res.apiVersion}/${res.kind}`;
  const name = res.metadata?.name ?? null;
  const Model = MODELS[key];
  if (!Model) {
    console.log(JSON.stringify({ kind: key, name, ok: false, error: "unsupported kind" }));
    status = 2;
    continue;
  }
  try {
    new Model(res).validate();
    console.log(JSON.stringify({ kind: key, name, ok: true, error: null }));
  } catch (err) {
    console.log(JSON.stringify({ kind: key, name, ok: false, error: String(err.message ?? err) }));
    if (status === 0) status = 1;
  }
}
process.exit(status);

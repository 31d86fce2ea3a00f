{{/* Names and labels shared by every object. */}}
{{- define "gce.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "gce.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "gce.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "gce.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "gce.selector" -}}
app.kubernetes.io/name: {{ include "gce.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* The agent pods' labels: the DaemonSet selector, its Service, the NetworkPolicy and the aggregator's
     discovery selector (GPUCOST_AGENT_SELECTOR) all come from here, so they cannot drift apart. */}}
{{- define "gce.agentSelector" -}}
{{ include "gce.selector" . }}
app.kubernetes.io/component: agent
{{- end -}}

{{- define "gce.aggregatorSelector" -}}
{{ include "gce.selector" . }}
app.kubernetes.io/component: aggregator
{{- end -}}

{{/* GPUCOST_AGENT_SELECTOR: the same labels as "k=v,k=v", sorted. */}}
{{- define "gce.agentSelectorString" -}}
{{- $labels := include "gce.agentSelector" . | fromYaml -}}
{{- $terms := list -}}
{{- range $k := keys $labels | sortAlpha -}}
{{- $terms = append $terms (printf "%s=%s" $k (index $labels $k)) -}}
{{- end -}}
{{- join "," $terms -}}
{{- end -}}

{{/* Agent bearer token: the chart's Secret or agentAuth.existingSecret; mounted here in both daemons. */}}
{{- define "gce.agentTokenSecret" -}}
{{- default (printf "%s-agent-token" (include "gce.fullname" .)) .Values.agentAuth.existingSecret -}}
{{- end -}}

{{/* Whether the agent reads the API at all (pod watch, shared-GPU context, DRA): only then is its
ServiceAccount token mounted and its ClusterRole rendered. */}}
{{- define "gce.agentReadsApi" -}}
{{- if or .Values.agent.watchPods .Values.agent.sharing.enabled .Values.agent.dra.enabled (eq .Values.agent.dcgm.mode "discover") }}true{{ else }}false{{ end }}
{{- end -}}

{{/* Exporter discovery: LABELS@PORT[/https];... as GPUCOST_EXPORTER_SELECTORS reads it. */}}
{{- define "gce.exporterSelectors" -}}
{{- $out := list }}
{{- range .Values.agent.dcgm.selectors }}
{{- $out = append $out (printf "%s@%d%s" .labels (int .port) (ternary "/https" "" (eq (default "http" .scheme) "https"))) }}
{{- end }}
{{- join ";" $out }}
{{- end -}}

{{- define "gce.exporterHttps" -}}
{{- range .Values.agent.dcgm.selectors }}{{ if eq (default "http" .scheme) "https" }}true{{ end }}{{ end }}
{{- end -}}

{{- define "gce.agentTokenDir" -}}/var/run/gpu-cost-exporter/agent-token{{- end -}}

{{/* Agent TLS: an existing Secret, or the one the cert-manager Certificate writes. */}}
{{- define "gce.agentTlsSecret" -}}
{{- if .Values.agent.tls.secretName -}}
{{- .Values.agent.tls.secretName -}}
{{- else if .Values.agent.tls.certManager.enabled -}}
{{- printf "%s-agent-tls" (include "gce.fullname" .) -}}
{{- else -}}
{{- fail "agent.tls.enabled needs agent.tls.secretName or agent.tls.certManager.enabled" -}}
{{- end -}}
{{- end -}}

{{- define "gce.agentTlsServerName" -}}
{{- default (printf "%s-agent.%s.svc" (include "gce.fullname" .) .Release.Namespace) .Values.agent.tls.serverName -}}
{{- end -}}

{{- define "gce.agentTlsDir" -}}/var/run/gpu-cost-exporter/agent-tls{{- end -}}

{{- define "gce.image" -}}
{{ .Values.image.repository }}:{{ default .Chart.AppVersion .Values.image.tag }}
{{- end -}}

{{- define "gce.pricingConfigMap" -}}
{{- default (printf "%s-pricing" (include "gce.fullname" .)) .Values.pricing.existingConfigMap -}}
{{- end -}}

{{/* Whether the ledger is PostgreSQL (aggregator.postgres.url set; shards need it): replicas then share
     it, so no ledger volume is claimed and HA replicas are a Deployment. */}}
{{- define "gce.postgresLedger" -}}
{{- if or .Values.aggregator.postgres.url (gt (int .Values.aggregator.shards) 1) }}true{{ else }}false{{ end }}
{{- end -}}

{{/* The aggregator's pod template, shared by the Deployment (1 replica, or HA on PostgreSQL), the
     StatefulSet (HA on SQLite) and the shards' StatefulSet. Context: dict "root" $ "ha" bool "shards" bool. */}}
{{- define "gce.aggregatorPodTemplate" }}
{{- $pg := eq (include "gce.postgresLedger" .root) "true" }}
  template:
    metadata:
      labels:
        {{- include "gce.aggregatorSelector" .root | nindent 8 }}
      annotations:
        checksum/pricing: {{ toYaml .root.Values.pricing | sha256sum }}
        {{- if .root.Values.monitoring.scrapeAnnotations }}
        prometheus.io/scrape: "true"
        prometheus.io/port: {{ .root.Values.aggregator.port | quote }}
        prometheus.io/path: /metrics
        {{- end }}
        {{- with .root.Values.aggregator.podAnnotations }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
    spec:
      serviceAccountName: {{ include "gce.fullname" .root }}-aggregator
      terminationGracePeriodSeconds: 30
      {{- with .root.Values.aggregator.priorityClassName }}
      priorityClassName: {{ . }}
      {{- end }}
      {{- with .root.Values.imagePullSecrets }}
      imagePullSecrets:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      securityContext:
        fsGroup: {{ .root.Values.securityContext.runAsGroup }}
      containers:
        - name: aggregator
          image: {{ include "gce.image" .root }}
          imagePullPolicy: {{ .root.Values.image.pullPolicy }}
          args: [aggregator]
          env:
            - name: GPUCOST_LISTEN
              value: "0.0.0.0:{{ .root.Values.aggregator.port }}"
            - name: GPUCOST_TICK
              value: {{ .root.Values.aggregator.tick | quote }}
            {{- if $pg }}
            - name: GPUCOST_LEDGER
              value: {{ required "aggregator.postgres.url is required with aggregator.shards > 1" .root.Values.aggregator.postgres.url | quote }}
            - name: GPUCOST_CLUSTER
              value: {{ required "aggregator.postgres.cluster is required with a PostgreSQL ledger" .root.Values.aggregator.postgres.cluster | quote }}
            {{- if .root.Values.aggregator.postgres.passwordSecret.name }}
            - name: GPUCOST_LEDGER_PASSWORD_FILE
              value: /etc/gpu-cost-exporter-ledger/password
            {{- end }}
            {{- if .shards }}
            # The shard index is the pod's ordinal (its hostname), so only the count is set here.
            - name: GPUCOST_SHARDS
              value: {{ .root.Values.aggregator.shards | quote }}
            {{- end }}
            {{- else }}
            - name: GPUCOST_LEDGER
              value: /var/lib/gpu-cost-exporter/ledger.db
            {{- end }}
            - name: GPUCOST_PRICING_FILE
              value: /etc/gpu-cost-exporter/pricing.yaml
            {{- with .root.Values.budgets }}
            - name: GPUCOST_BUDGETS
              value: {{ toJson . | quote }}
            {{- end }}
            {{- if .root.Values.windowBudgets }}
            - name: GPUCOST_WINDOW_BUDGETS_FILE
              value: /etc/gpu-cost-exporter/budgets.yaml
            - name: GPUCOST_BUDGET_DRY_RUN
              value: {{ .root.Values.windowBudgetsDryRun | quote }}
            {{- end }}
            - name: GPUCOST_POOL_LABEL
              value: {{ .root.Values.aggregator.poolLabel | quote }}
            - name: GPUCOST_IDLE_THRESHOLD
              value: {{ .root.Values.aggregator.idleThreshold | quote }}
            # Discover agents only among this release's agent pods, in this namespace.
            - name: GPUCOST_AGENT_SELECTOR
              value: {{ include "gce.agentSelectorString" .root | quote }}
            - name: GPUCOST_AGENT_NAMESPACE
              value: {{ .root.Release.Namespace | quote }}
            - name: GPUCOST_AGENT_PORT
              value: {{ .root.Values.agent.port | quote }}
            {{- if .root.Values.agentAuth.enabled }}
            - name: GPUCOST_AGENT_TOKEN_FILE
              value: {{ printf "%s/token" (include "gce.agentTokenDir" .root) | quote }}
            {{- end }}
            {{- if .root.Values.agent.tls.enabled }}
            - name: GPUCOST_AGENT_SCHEME
              value: https
            - name: GPUCOST_AGENT_CA_FILE
              value: {{ printf "%s/ca.crt" (include "gce.agentTlsDir" .root) | quote }}
            # Agents are pulled by pod IP; their certificate names the Service instead.
            - name: GPUCOST_AGENT_TLS_SERVER_NAME
              value: {{ include "gce.agentTlsServerName" .root | quote }}
            {{- end }}
            - name: GPUCOST_LOG_FORMAT
              value: json
            - name: GPUCOST_AUTH
              value: {{ .root.Values.auth.mode | quote }}
            - name: GPUCOST_AUTH_CACHE_TTL
              value: {{ .root.Values.auth.cacheTTL | quote }}
            {{- with .root.Values.auth.oidc }}
            {{- if .issuer }}
            - name: GPUCOST_OIDC_ISSUER
              value: {{ .issuer | quote }}
            - name: GPUCOST_OIDC_AUDIENCE
              value: {{ required "auth.oidc.audience is required with auth.oidc.issuer" .audience | quote }}
            - name: GPUCOST_OIDC_USERNAME_CLAIM
              value: {{ .usernameClaim | quote }}
            - name: GPUCOST_OIDC_GROUPS_CLAIM
              value: {{ .groupsClaim | quote }}
            {{- end }}
            {{- end }}
            {{- if .ha }}
            - name: GPUCOST_LEADER_ELECTION
              value: "true"
            - name: GPUCOST_LEASE_NAMESPACE
              value: {{ .root.Release.Namespace | quote }}
            - name: GPUCOST_LEASE_NAME
              value: {{ printf "%s-aggregator" (include "gce.fullname" .root) | quote }}
            {{- end }}
            {{- with .root.Values.aggregator.extraEnv }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
          ports:
            - name: http
              containerPort: {{ .root.Values.aggregator.port }}
          livenessProbe:
            httpGet: {path: /healthz, port: http}
            periodSeconds: 20
            failureThreshold: 3
          readinessProbe:
            httpGet: {path: /readyz, port: http}
            periodSeconds: 10
          resources:
            {{- toYaml .root.Values.aggregator.resources | nindent 12 }}
          securityContext:
            {{- toYaml .root.Values.securityContext | nindent 12 }}
          volumeMounts:
            - name: ledger
              mountPath: /var/lib/gpu-cost-exporter
            - name: pricing
              mountPath: /etc/gpu-cost-exporter
              readOnly: true
            {{- if and $pg .root.Values.aggregator.postgres.passwordSecret.name }}
            - name: ledger-password
              mountPath: /etc/gpu-cost-exporter-ledger
              readOnly: true
            {{- end }}
            {{- if .root.Values.agentAuth.enabled }}
            # The whole Secret volume, never subPath: kubelet then updates the file when the Secret changes.
            - name: agent-token
              mountPath: {{ include "gce.agentTokenDir" .root }}
              readOnly: true
            {{- end }}
            {{- if .root.Values.agent.tls.enabled }}
            - name: agent-ca
              mountPath: {{ include "gce.agentTlsDir" .root }}
              readOnly: true
            {{- end }}
      volumes:
        {{- if $pg }}
        - name: ledger
          emptyDir: {}  # the ledger is the database; nothing of it is kept here
        {{- with .root.Values.aggregator.postgres.passwordSecret }}
        {{- if .name }}
        - name: ledger-password
          secret:
            secretName: {{ .name }}
            items: [{key: {{ .key | quote }}, path: password}]
            defaultMode: 0440
        {{- end }}
        {{- end }}
        {{- else if not .ha }}
        - name: ledger
          {{- if .root.Values.aggregator.persistence.enabled }}
          persistentVolumeClaim:
            claimName: {{ default (printf "%s-ledger" (include "gce.fullname" .root)) .root.Values.aggregator.persistence.existingClaim }}
          {{- else }}
          emptyDir: {}
          {{- end }}
        {{- end }}
        - name: pricing
          configMap:
            name: {{ include "gce.pricingConfigMap" .root }}
        {{- if .root.Values.agentAuth.enabled }}
        - name: agent-token
          secret:
            secretName: {{ include "gce.agentTokenSecret" .root }}
            defaultMode: 0440
            items:
              - key: {{ .root.Values.agentAuth.secretKey }}
                path: token
        {{- end }}
        {{- if .root.Values.agent.tls.enabled }}
        # Only the CA: the agents' private key never reaches the aggregator.
        - name: agent-ca
          secret:
            secretName: {{ include "gce.agentTlsSecret" .root }}
            defaultMode: 0440
            items:
              - key: {{ .root.Values.agent.tls.caKey }}
                path: ca.crt
        {{- end }}
      {{- with .root.Values.aggregator.nodeSelector }}
      nodeSelector:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with .root.Values.aggregator.affinity }}
      affinity:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with .root.Values.aggregator.tolerations }}
      tolerations:
        {{- toYaml . | nindent 8 }}
      {{- end }}
{{- end -}}

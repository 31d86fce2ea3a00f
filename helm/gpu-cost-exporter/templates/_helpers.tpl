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

{{- define "gce.image" -}}
{{ .Values.image.repository }}:{{ default .Chart.AppVersion .Values.image.tag }}
{{- end -}}

{{- define "gce.pricingConfigMap" -}}
{{- default (printf "%s-pricing" (include "gce.fullname" .)) .Values.pricing.existingConfigMap -}}
{{- end -}}


{{/* The aggregator's pod template, shared by the Deployment (1 replica) and the StatefulSet (HA).
     Context: dict "root" $ "ha" bool. */}}
{{- define "gce.aggregatorPodTemplate" }}
  template:
    metadata:
      labels:
        {{- include "gce.selector" .root | nindent 8 }}
        app.kubernetes.io/component: aggregator
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
            - name: GPUCOST_LEDGER
              value: /var/lib/gpu-cost-exporter/ledger.db
            - name: GPUCOST_PRICING_FILE
              value: /etc/gpu-cost-exporter/pricing.yaml
            - name: GPUCOST_POOL_LABEL
              value: {{ .root.Values.aggregator.poolLabel | quote }}
            - name: GPUCOST_IDLE_THRESHOLD
              value: {{ .root.Values.aggregator.idleThreshold | quote }}
            - name: GPUCOST_AGENT_SELECTOR
              value: "app.kubernetes.io/name={{ include "gce.name" .root }},app.kubernetes.io/instance={{ .root.Release.Name }},app.kubernetes.io/component=agent"
            - name: GPUCOST_AGENT_NAMESPACE
              value: {{ .root.Release.Namespace | quote }}
            - name: GPUCOST_AGENT_PORT
              value: {{ .root.Values.agent.port | quote }}
            - name: GPUCOST_LOG_FORMAT
              value: json
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
      volumes:
        {{- if not .ha }}
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

# syntax=docker/dockerfile:1
# probegate: a static, non-root image of the proxy.
#   docker build -t probegate .
#   docker run -p 8080:8080 -v $PWD/config.yaml:/etc/probegate/config.yaml probegate
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/probegate .

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/probegate /usr/local/bin/probegate
COPY config.yaml /etc/probegate/config.yaml
USER nonroot:nonroot
# 8080: the OpenAI-compatible API; 9090: admin (/metrics, /healthz, /readyz).
# In a container the admin listener must bind beyond loopback to be scraped:
# set server.admin_listen: ":9090" and keep that port off public Services.
EXPOSE 8080 9090
ENTRYPOINT ["/usr/local/bin/probegate"]
CMD ["-config", "/etc/probegate/config.yaml"]

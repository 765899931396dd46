// wasm-deployer-ocm-writer: a second, independent writer of OCM component versions, for the
// cross-check story in tests/ocm.rs. It is NOT our test tooling (tests/support/ocm.rs): it writes
// through the OCM Go library (github.com/open-component-model/ocm v0.6.0) exactly as vendored in
// the real Landscaper snapshot (../shared/tools/real-landscaper/landscaper-adaa33988.tar.xz), with
// the library's ordinary API. The test copies this file into that module as
// cmd/wasm-deployer-ocm-writer and builds it offline (GOFLAGS=-mod=vendor GOPROXY=off).
//
//	wasm-deployer-ocm-writer -registry http://127.0.0.1:PORT -sub-path ocm \
//	    -component example.com/acme/web -version 1.0.0 -chart web-0.1.0.tgz [-oci-hint charts/web:0.1.0]
//
// Writes component version COMPONENT:VERSION (descriptor v2, the library's default) into the
// OCIRegistry repository REGISTRY/SUB_PATH (component name mapping urlPath) with resources
//   - "chart": the chart archive as a local blob (SetResourceBlob, type helmChart, media type
//     application/vnd.cncf.helm.chart.content.v1.tar+gzip), stored as a layer of the component
//     version's manifest;
//   - "chart-oci" (with -oci-hint NAME:TAG): the chart as an OCI artifact (Helm's config and chart
//     layer media types, synthesized as an OCI artifact set as `ocm add resources` does for a helm
//     input), pushed by the library's OCI context to REGISTRY/NAME:TAG — the transfer the library's
//     OCI-registry blob handler does — and described by SetResource with an ociArtifact access whose
//     imageReference is HOST:PORT/NAME:TAG (no scheme: the library's ociArtifact access method
//     drops one and asks for an alias instead; the writer sets the OCI context's alias HOST:PORT ->
//     REGISTRY so that the library itself speaks plain HTTP to it).
//
// Why not SetResourceBlob for the artifact too: this library version's blob handler forms the
// imageReference with path.Join(baseURL, namespace), which turns "http://127.0.0.1:PORT" into
// "http:/127.0.0.1:PORT/..." and then refuses its own reference ("oci reference ... is invalid");
// without a scheme it speaks HTTPS only, which a loopback plain-HTTP registry does not answer.
//
// Before printing, it reads the component version back through the library (each resource by
// its access method) so that what it wrote is what OCM itself reads. Prints the descriptor as
// stored (JSON, schema v2) on stdout.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/open-component-model/ocm/pkg/blobaccess"
	"github.com/open-component-model/ocm/pkg/common/accessobj"
	"github.com/open-component-model/ocm/pkg/contexts/oci/artdesc"
	"github.com/open-component-model/ocm/pkg/contexts/oci/repositories/artifactset"
	ociregistry "github.com/open-component-model/ocm/pkg/contexts/oci/repositories/ocireg"
	"github.com/open-component-model/ocm/pkg/contexts/oci/transfer"
	"github.com/open-component-model/ocm/pkg/contexts/ocm"
	"github.com/open-component-model/ocm/pkg/contexts/ocm/accessmethods/ociartifact"
	"github.com/open-component-model/ocm/pkg/contexts/ocm/compdesc"
	metav1 "github.com/open-component-model/ocm/pkg/contexts/ocm/compdesc/meta/v1"
	"github.com/open-component-model/ocm/pkg/contexts/ocm/repositories/ocireg"
	"github.com/open-component-model/ocm/pkg/contexts/ocm/resourcetypes"
	"github.com/open-component-model/ocm/pkg/helm"
)

const helmConfigMediaType = "application/vnd.cncf.helm.config.v1+json"

func main() {
	registry := flag.String("registry", "", "OCI registry base URL, e.g. http://127.0.0.1:5000")
	subPath := flag.String("sub-path", "", "sub path of the OCM repository in the registry")
	component := flag.String("component", "", "component name")
	version := flag.String("version", "", "component version")
	chart := flag.String("chart", "", "Helm chart archive (.tgz)")
	ociHint := flag.String("oci-hint", "", "also store the chart as an OCI artifact named NAME:TAG")
	flag.Parse()
	if *registry == "" || *component == "" || *version == "" || *chart == "" {
		flag.Usage()
		os.Exit(2)
	}
	data, err := os.ReadFile(*chart)
	if err == nil {
		err = write(*registry, *subPath, *component, *version, data, *ociHint)
	}
	var out []byte
	if err == nil {
		out, err = readBack(*registry, *subPath, *component, *version, data)
		if err != nil {
			err = fmt.Errorf("reading back through the library: %w", err)
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "wasm-deployer-ocm-writer: %v\n", err)
		os.Exit(1)
	}
	fmt.Println(string(out))
}

// context is an OCM context that speaks plain HTTP to registry if its URL says http://, and
// registry's host:port.
func context(registry string) (ocm.Context, string) {
	octx := ocm.New()
	host := registry
	if _, rest, ok := strings.Cut(registry, "://"); ok {
		host = rest
	}
	host = strings.TrimSuffix(host, "/")
	// How this library is told that a host of OCI references speaks plain HTTP.
	octx.OCIContext().SetAlias(host, ociregistry.NewRepositorySpec(registry))
	return octx, host
}

func repositorySpec(registry, subPath string) ocm.RepositorySpec {
	return ocireg.NewRepositorySpec(registry, ocireg.NewComponentRepositoryMeta(subPath, ocireg.OCIRegistryURLPathMapping))
}

func write(registry, subPath, component, version string, data []byte, ociHint string) error {
	octx, host := context(registry)
	repo, err := octx.RepositoryForSpec(repositorySpec(registry, subPath))
	if err != nil {
		return fmt.Errorf("repository %s: %w", registry, err)
	}
	defer repo.Close()
	comp, err := repo.LookupComponent(component)
	if err != nil {
		return fmt.Errorf("component %s: %w", component, err)
	}
	defer comp.Close()
	cv, err := comp.NewVersion(version, true)
	if err != nil {
		return fmt.Errorf("new version %s: %w", version, err)
	}
	defer cv.Close()
	cv.GetDescriptor().Provider.Name = "acme"

	// The chart as a local blob.
	meta := ocm.NewResourceMeta("chart", resourcetypes.HELM_CHART, metav1.LocalRelation)
	meta.Version = "1.0.0"
	if err := cv.SetResourceBlob(meta, blobaccess.ForData(helm.ChartMediaType, data), "", nil); err != nil {
		return fmt.Errorf("resource chart: %w", err)
	}
	// The chart as an OCI artifact, pushed by the library's OCI context.
	if ociHint != "" {
		ref, err := pushArtifact(octx, registry, host, ociHint, data)
		if err != nil {
			return fmt.Errorf("pushing %s: %w", ociHint, err)
		}
		meta := ocm.NewResourceMeta("chart-oci", resourcetypes.HELM_CHART, metav1.ExternalRelation)
		meta.Version = "1.0.0"
		if err := cv.SetResource(meta, ociartifact.New(ref)); err != nil {
			return fmt.Errorf("resource chart-oci: %w", err)
		}
	}
	if err := comp.AddVersion(cv); err != nil {
		return fmt.Errorf("add version: %w", err)
	}
	return nil
}

// chartArtifactSet is the chart archive as an OCI artifact set blob: one manifest with Helm's
// config and chart layer media types, tagged with the hint's tag and marked as the main artifact
// (what the OCM CLI's helm input synthesizes).
func chartArtifactSet(chart []byte, hint string) (blobaccess.BlobAccess, error) {
	name, tag, _ := strings.Cut(hint, ":")
	name = name[strings.LastIndex(name, "/")+1:]
	return artifactset.SythesizeArtifactSet(func(set *artifactset.ArtifactSet) (string, error) {
		config, err := json.Marshal(map[string]string{"name": name, "version": tag, "apiVersion": "v2"})
		if err != nil {
			return "", err
		}
		cfg := blobaccess.ForData(helmConfigMediaType, config)
		if err := set.AddBlob(cfg); err != nil {
			return "", err
		}
		desc := artdesc.NewManifestArtifact()
		desc.Manifest().Config = *artdesc.DefaultBlobDescriptor(cfg)
		art, err := set.NewArtifact(desc)
		if err != nil {
			return "", err
		}
		defer art.Close()
		if _, err := art.AddLayer(blobaccess.ForData(helm.ChartMediaType, chart), nil); err != nil {
			return "", err
		}
		blob, err := set.AddArtifact(art, tag)
		if err != nil {
			return "", err
		}
		set.Annotate(artifactset.MAINARTIFACT_ANNOTATION, blob.Digest().String())
		return artdesc.MediaTypeImageManifest, nil
	})
}

// pushArtifact pushes the chart as OCI artifact hint (NAME:TAG) into registry and returns its
// reference (host/NAME:TAG).
func pushArtifact(octx ocm.Context, registry, host, hint string, chart []byte) (string, error) {
	name, tag, _ := strings.Cut(hint, ":")
	blob, err := chartArtifactSet(chart, hint)
	if err != nil {
		return "", err
	}
	defer blob.Close()
	set, err := artifactset.OpenFromBlob(accessobj.ACC_READONLY, blob)
	if err != nil {
		return "", err
	}
	defer set.Close()
	art, err := set.GetArtifact(set.GetMain().String())
	if err != nil {
		return "", err
	}
	defer art.Close()
	orepo, err := octx.OCIContext().RepositoryForSpec(ociregistry.NewRepositorySpec(registry))
	if err != nil {
		return "", err
	}
	defer orepo.Close()
	ns, err := orepo.LookupNamespace(name)
	if err != nil {
		return "", err
	}
	defer ns.Close()
	if err := transfer.TransferArtifact(art, ns, tag); err != nil {
		return "", err
	}
	return host + "/" + name + ":" + tag, nil
}

// readBack looks the component version up again, in a fresh context, and reads each resource
// through its access method: the local blob must be the chart, the OCI artifact (which the
// library reads as an artifact set) must be there. Returns the descriptor as read (JSON, schema v2).
func readBack(registry, subPath, component, version string, chart []byte) ([]byte, error) {
	octx, _ := context(registry)
	repo, err := octx.RepositoryForSpec(repositorySpec(registry, subPath))
	if err != nil {
		return nil, err
	}
	defer repo.Close()
	cv, err := repo.LookupComponentVersion(component, version)
	if err != nil {
		return nil, err
	}
	defer cv.Close()
	for _, r := range cv.GetResources() {
		m, err := r.AccessMethod()
		if err != nil {
			return nil, fmt.Errorf("resource %s: %w", r.Meta().Name, err)
		}
		got, err := m.Get()
		m.Close()
		if err != nil {
			return nil, fmt.Errorf("resource %s: %w", r.Meta().Name, err)
		}
		if r.Meta().Name == "chart" && !bytes.Equal(got, chart) {
			return nil, fmt.Errorf("resource chart: %d bytes read back differ from the chart's %d", len(got), len(chart))
		}
		if len(got) == 0 {
			return nil, fmt.Errorf("resource %s: empty", r.Meta().Name)
		}
	}
	return compdesc.Encode(cv.GetDescriptor(), compdesc.DefaultJSONCodec)
}

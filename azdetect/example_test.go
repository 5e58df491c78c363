package azdetect_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/azkafka/azkafka/azdetect"
)

// The shortest use: the process-wide, cached detection configured from the
// environment. (Not run here: off a cloud it would query the metadata
// addresses.)
func ExampleDetect() {
	res, err := azdetect.Detect(context.Background())
	if err != nil {
		// Not fatal: go on without a zone, e.g. without a zone-aware client ID.
		slog.Warn("availability zone unknown", "err", err)
		return
	}
	fmt.Println(res.AZ, "from", res.Source)
}

// A Detector with an explicit zone answers without any network call.
func ExampleNew() {
	d := azdetect.New(azdetect.Config{AZ: "eu-west-1b"})
	res, err := d.Detect(context.Background())
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(res.AZ, res.Source)
	// Output: eu-west-1b option
}

// ConfigFromEnv reads the azkafka and cloud variables through a getenv
// function; AZKAFKA_AZ set means no provider runs.
func ExampleConfigFromEnv() {
	env := map[string]string{"AZKAFKA_AZ": "us-east-1a", "AZKAFKA_DETECT_TIMEOUT": "500ms"}
	cfg, err := azdetect.ConfigFromEnv(func(k string) string { return env[k] })
	if err != nil {
		fmt.Println(err)
		return
	}
	res, err := azdetect.New(cfg).Detect(context.Background())
	fmt.Println(res.AZ, res.Source, cfg.Timeout, err)

	// A malformed variable is named, with its value quoted.
	env["AZKAFKA_AZ"] = "us-east-1a,warpstream_interzone_lb=false"
	_, err = azdetect.ConfigFromEnv(func(k string) string { return env[k] })
	fmt.Println(err)
	// Output:
	// us-east-1a env 500ms <nil>
	// azdetect: AZKAFKA_AZ="us-east-1a,warpstream_interzone_lb=false": invalid AZ: byte "," at offset 10 is not one of a-z, 0-9, '-'
}

func ExampleValidate() {
	az, err := azdetect.Validate(" us-east-1a\n")
	fmt.Printf("%q %v\n", az, err)
	_, err = azdetect.Validate("us-east-1a,warpstream_interzone_lb=false")
	fmt.Println(errors.Is(err, azdetect.ErrInvalidAZ))
	// Output:
	// "us-east-1a" <nil>
	// true
}

// A failed detection is a *DetectError listing every provider's reason; it
// matches ErrNoAZ.
func ExampleDetectError() {
	d := azdetect.New(azdetect.Config{AZ: "Zone A"})
	_, err := d.Detect(context.Background())
	var de *azdetect.DetectError
	fmt.Println(errors.Is(err, azdetect.ErrNoAZ), errors.As(err, &de))
	fmt.Println(de.Providers[0].Name, de.Providers[0].Err)
	// Output:
	// true true
	// option Config.AZ="Zone A": invalid AZ: byte "Z" at offset 0 is not one of a-z, 0-9, '-'
}

// A pod's application written against the AWS SDK for Go v2 with nothing but the claim's
// ConfigMap in its environment and its projected ServiceAccount token on disk: the SDK's default
// configuration finds the role, the token and the STS endpoint by itself (AWS_ROLE_ARN,
// AWS_WEB_IDENTITY_TOKEN_FILE, AWS_ENDPOINT_URL_STS), trades the token for a session, and the
// program writes, reads and lists the claim's bucket. One line per step; on the first failure
// it prints the error and exits 1.
package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

func fail(step string, err error) {
	fmt.Printf("failed to %s: %v\n", step, err)
	os.Exit(1)
}

func main() {
	for _, stray := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"} {
		if _, set := os.LookupEnv(stray); set {
			fail("start", fmt.Errorf("%s is set: the consumer must hold no key", stray))
		}
	}
	bucket := os.Getenv("BUCKET_NAME")
	ctx := context.Background()
	cfg, err := config.LoadDefaultConfig(ctx)
	if err != nil {
		fail("load the configuration", err)
	}
	client := s3.NewFromConfig(cfg, func(o *s3.Options) { o.UsePathStyle = true })
	body := []byte("keyless from go")
	_, err = client.PutObject(ctx, &s3.PutObjectInput{
		Bucket: aws.String(bucket), Key: aws.String("from-go"), Body: bytes.NewReader(body),
	})
	if err != nil {
		fail("write", err)
	}
	fmt.Println("wrote")
	got, err := client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String("from-go")})
	if err != nil {
		fail("read", err)
	}
	read, err := io.ReadAll(got.Body)
	if err != nil || !bytes.Equal(read, body) {
		fail("read back", fmt.Errorf("%q, %v", read, err))
	}
	fmt.Println("read")
	listed, err := client.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(bucket)})
	if err != nil {
		fail("list", err)
	}
	keys := []string{}
	for _, object := range listed.Contents {
		keys = append(keys, aws.ToString(object.Key))
	}
	fmt.Printf("listed %s\n", strings.Join(keys, ","))
	credentials, err := cfg.Credentials.Retrieve(ctx)
	if err != nil {
		fail("read the session", err)
	}
	if !strings.HasPrefix(credentials.AccessKeyID, "ASIA") || credentials.SessionToken == "" {
		fail("hold a session", fmt.Errorf("key %s", credentials.AccessKeyID))
	}
	fmt.Printf("session %s\n", credentials.AccessKeyID)
}

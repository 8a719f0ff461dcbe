// gltf-validator ships no types; the tests use only validateBytes.
declare module 'gltf-validator' {
  interface ValidationReport {
    issues: {
      numErrors: number;
      numWarnings: number;
      messages: Array<{ code: string; message: string; severity: number; pointer?: string }>;
    };
  }
  const validator: {
    validateBytes(
      data: Uint8Array,
      options?: { maxIssues?: number; externalResourceFunction?: (uri: string) => Promise<Uint8Array> },
    ): Promise<ValidationReport>;
  };
  export default validator;
}

/* A stand-in libnvrtc for the loader's tests: every entry point flashgen resolves, reporting
 * version FAKE_MAJOR.FAKE_MINOR; everything but nvrtcVersion fails. */
#define FAKE_FAIL 7 /* NVRTC_ERROR_INVALID_INPUT */

int nvrtcVersion(int* major, int* minor) {
  *major = FAKE_MAJOR;
  *minor = FAKE_MINOR;
  return 0;
}
const char* nvrtcGetErrorString(int result) { return result == 0 ? "NVRTC_SUCCESS" : "fake NVRTC"; }
int nvrtcCreateProgram(void) { return FAKE_FAIL; }
int nvrtcDestroyProgram(void) { return FAKE_FAIL; }
int nvrtcCompileProgram(void) { return FAKE_FAIL; }
int nvrtcGetProgramLogSize(void) { return FAKE_FAIL; }
int nvrtcGetProgramLog(void) { return FAKE_FAIL; }
int nvrtcGetCUBINSize(void) { return FAKE_FAIL; }
int nvrtcGetCUBIN(void) { return FAKE_FAIL; }
int nvrtcGetPTXSize(void) { return FAKE_FAIL; }
int nvrtcGetPTX(void) { return FAKE_FAIL; }

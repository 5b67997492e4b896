// Max and average pooling of caffe-geeps on the GPU, with Caffe's windows
// (padding counts in the average's divisor, windows clipped to the input).
// Forward: one thread per output. Backward: one thread per input pixel,
// gathering from the outputs whose windows hold it, in the CPU layer's
// order, so no atomics are needed and the sums match the CPU's bit for bit.
// The max mask holds each output's argmax as a float index in its plane.

#define FOR_EACH(i, n) \
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += blockDim.x * gridDim.x)

struct Window {
  int hs, he, ws, we;
  float size;
};

__device__ Window pool_window(int ph, int pw, int height, int width, int kh, int kw, int sh, int sw, int pad_h,
                              int pad_w) {
  Window w;
  int hstart = ph * sh - pad_h, wstart = pw * sw - pad_w;
  int hend_pad = min(hstart + kh, height + pad_h), wend_pad = min(wstart + kw, width + pad_w);
  w.size = (float)((hend_pad - hstart) * (wend_pad - wstart));
  w.hs = max(hstart, 0);
  w.ws = max(wstart, 0);
  w.he = min(hstart + kh, height);
  w.we = min(wstart + kw, width);
  return w;
}

// Geometry as one argument list: planes = num * channels.
#define GEOMETRY                                                                                         \
  unsigned planes, int height, int width, int out_h, int out_w, int kh, int kw, int sh, int sw, int pad_h, \
      int pad_w

extern "C" __global__ void max_pool_forward(const float* x, float* y, float* mask, GEOMETRY) {
  unsigned n = planes * out_h * out_w;
  FOR_EACH(i, n) {
    int pw = i % out_w, ph = (i / out_w) % out_h;
    unsigned plane = i / (out_w * out_h);
    Window w = pool_window(ph, pw, height, width, kh, kw, sh, sw, pad_h, pad_w);
    const float* xp = x + (size_t)plane * height * width;
    float best = -__int_as_float(0x7f800000);
    int at = w.hs * width + w.ws;
    for (int h = w.hs; h < w.he; ++h) {
      for (int c = w.ws; c < w.we; ++c) {
        float v = xp[h * width + c];
        if (v > best) {
          best = v;
          at = h * width + c;
        }
      }
    }
    y[i] = best;
    mask[i] = (float)at;
  }
}

extern "C" __global__ void avg_pool_forward(const float* x, float* y, GEOMETRY) {
  unsigned n = planes * out_h * out_w;
  FOR_EACH(i, n) {
    int pw = i % out_w, ph = (i / out_w) % out_h;
    unsigned plane = i / (out_w * out_h);
    Window w = pool_window(ph, pw, height, width, kh, kw, sh, sw, pad_h, pad_w);
    const float* xp = x + (size_t)plane * height * width;
    float sum = 0.0f;
    for (int h = w.hs; h < w.he; ++h) {
      float row = 0.0f;
      for (int c = w.ws; c < w.we; ++c) row += xp[h * width + c];
      sum += row;
    }
    y[i] = sum / w.size;
  }
}

// The outputs whose (unclipped) windows can hold input row `h`: [first, last).
__device__ void covering(int h, int k, int s, int pad, int out, int* first, int* last) {
  *first = (h + pad < k) ? 0 : (h + pad - k) / s + 1;
  *last = min((h + pad) / s + 1, out);
}

extern "C" __global__ void max_pool_backward(const float* dy, const float* mask, float* dx, GEOMETRY) {
  unsigned n = planes * height * width;
  FOR_EACH(i, n) {
    int c = i % width, h = (i / width) % height;
    unsigned plane = i / (width * height);
    int ph0, ph1, pw0, pw1;
    covering(h, kh, sh, pad_h, out_h, &ph0, &ph1);
    covering(c, kw, sw, pad_w, out_w, &pw0, &pw1);
    const float* dyp = dy + (size_t)plane * out_h * out_w;
    const float* mp = mask + (size_t)plane * out_h * out_w;
    float here = (float)(h * width + c);
    float g = 0.0f;
    for (int ph = ph0; ph < ph1; ++ph)
      for (int pw = pw0; pw < pw1; ++pw)
        if (mp[ph * out_w + pw] == here) g += dyp[ph * out_w + pw];
    dx[i] = g;
  }
}

extern "C" __global__ void avg_pool_backward(const float* dy, float* dx, GEOMETRY) {
  unsigned n = planes * height * width;
  FOR_EACH(i, n) {
    int c = i % width, h = (i / width) % height;
    unsigned plane = i / (width * height);
    int ph0, ph1, pw0, pw1;
    covering(h, kh, sh, pad_h, out_h, &ph0, &ph1);
    covering(c, kw, sw, pad_w, out_w, &pw0, &pw1);
    const float* dyp = dy + (size_t)plane * out_h * out_w;
    float g = 0.0f;
    for (int ph = ph0; ph < ph1; ++ph) {
      for (int pw = pw0; pw < pw1; ++pw) {
        Window w = pool_window(ph, pw, height, width, kh, kw, sh, sw, pad_h, pad_w);
        if (h >= w.hs && h < w.he && c >= w.ws && c < w.we) g += dyp[ph * out_w + pw] / w.size;
      }
    }
    dx[i] = g;
  }
}

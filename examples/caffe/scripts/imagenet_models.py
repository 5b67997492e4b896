#!/usr/bin/env python3
"""Writes Caffe's reference ImageNet nets as train_val prototxt files into
examples/caffe/models/imagenet/: AlexNet (bvlc_alexnet), CaffeNet
(bvlc_reference_caffenet) and GoogLeNet (bvlc_googlenet), layer for layer
as the Caffe project publishes them (BSD-2-Clause): the same layer names,
order, sizes, fillers, lr/decay multipliers, LRN settings, transforms and
data sources. Regenerate with

    python3 examples/caffe/scripts/imagenet_models.py
"""
import os

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "models", "imagenet")
MEAN_FILE = "data/ilsvrc12/imagenet_mean.binaryproto"
TRAIN_DB = "examples/imagenet/ilsvrc12_train_lmdb"
VAL_DB = "examples/imagenet/ilsvrc12_val_lmdb"


def block(name, fields, indent):
    pad = "  " * indent
    out = [f"{pad}{name} {{"]
    for k, v in fields:
        if isinstance(v, list):
            out.append(block(k, v, indent + 1))
        else:
            out.append(f"{pad}  {k}: {v}")
    out.append(f"{pad}}}")
    return "\n".join(out)


def layer(name, type_, bottoms, tops, *extra):
    fields = [("name", f'"{name}"'), ("type", f'"{type_}"')]
    fields += [("bottom", f'"{b}"') for b in bottoms]
    fields += [("top", f'"{t}"') for t in tops]
    for e in extra:
        fields += e
    return block("layer", fields, 0)


def q(s):
    return f'"{s}"'


def filler(kind, **kw):
    return [("type", q(kind))] + [(k, v) for k, v in kw.items()]


LEARN = [("param", [("lr_mult", 1), ("decay_mult", 1)]), ("param", [("lr_mult", 2), ("decay_mult", 0)])]


def conv(name, bottom, top, num, k, weight, bias, stride=None, pad=None, group=None):
    p = [("num_output", num)]
    if pad:
        p.append(("pad", pad))
    p.append(("kernel_size", k))
    if stride:
        p.append(("stride", stride))
    if group:
        p.append(("group", group))
    p += [("weight_filler", weight), ("bias_filler", bias)]
    return layer(name, "Convolution", [bottom], [top], LEARN, [("convolution_param", p)])


def fc(name, bottom, top, num, weight, bias):
    p = [("num_output", num), ("weight_filler", weight), ("bias_filler", bias)]
    return layer(name, "InnerProduct", [bottom], [top], LEARN, [("inner_product_param", p)])


def relu(name, blob):
    return layer(name, "ReLU", [blob], [blob])


def pool(name, bottom, top, method, k, stride, pad=None):
    p = [("pool", method), ("kernel_size", k), ("stride", stride)]
    if pad:
        p.append(("pad", pad))
    return layer(name, "Pooling", [bottom], [top], [("pooling_param", p)])


def lrn(name, bottom, top):
    return layer(name, "LRN", [bottom], [top], [("lrn_param", [("local_size", 5), ("alpha", 0.0001), ("beta", 0.75)])])


def dropout(name, blob, ratio):
    return layer(name, "Dropout", [blob], [blob], [("dropout_param", [("dropout_ratio", ratio)])])


def data_layers(transform_train, transform_test, train_batch, test_batch):
    out = []
    for phase, transform, db, batch in (("TRAIN", transform_train, TRAIN_DB, train_batch),
                                        ("TEST", transform_test, VAL_DB, test_batch)):
        out.append(layer("data", "Data", [], ["data", "label"], [("include", [("phase", phase)])],
                         [("transform_param", transform)],
                         [("data_param", [("source", q(db)), ("batch_size", batch), ("backend", "LMDB")])]))
    return out


def const(v):
    return filler("constant", value=v)


def gauss(std):
    return filler("gaussian", std=std)


def alexnet_like(name, caffenet):
    """AlexNet normalises before pooling; CaffeNet pools first and uses bias 1."""
    mean = [("mirror", "true"), ("crop_size", 227), ("mean_file", q(MEAN_FILE))]
    test = [("mirror", "false"), ("crop_size", 227), ("mean_file", q(MEAN_FILE))]
    out = [f'name: "{name}"'] + data_layers(mean, test, 256, 50)
    one = const(1) if caffenet else const(0.1)
    out += [conv("conv1", "data", "conv1", 96, 11, gauss(0.01), const(0), stride=4), relu("relu1", "conv1")]
    if caffenet:
        out += [pool("pool1", "conv1", "pool1", "MAX", 3, 2), lrn("norm1", "pool1", "norm1")]
    else:
        out += [lrn("norm1", "conv1", "norm1"), pool("pool1", "norm1", "pool1", "MAX", 3, 2)]
    first = "norm1" if caffenet else "pool1"
    out += [conv("conv2", first, "conv2", 256, 5, gauss(0.01), one, pad=2, group=2), relu("relu2", "conv2")]
    if caffenet:
        out += [pool("pool2", "conv2", "pool2", "MAX", 3, 2), lrn("norm2", "pool2", "norm2")]
    else:
        out += [lrn("norm2", "conv2", "norm2"), pool("pool2", "norm2", "pool2", "MAX", 3, 2)]
    second = "norm2" if caffenet else "pool2"
    out += [conv("conv3", second, "conv3", 384, 3, gauss(0.01), const(0), pad=1), relu("relu3", "conv3"),
            conv("conv4", "conv3", "conv4", 384, 3, gauss(0.01), one, pad=1, group=2), relu("relu4", "conv4"),
            conv("conv5", "conv4", "conv5", 256, 3, gauss(0.01), one, pad=1, group=2), relu("relu5", "conv5"),
            pool("pool5", "conv5", "pool5", "MAX", 3, 2),
            fc("fc6", "pool5", "fc6", 4096, gauss(0.005), one), relu("relu6", "fc6"), dropout("drop6", "fc6", 0.5),
            fc("fc7", "fc6", "fc7", 4096, gauss(0.005), one), relu("relu7", "fc7"), dropout("drop7", "fc7", 0.5),
            fc("fc8", "fc7", "fc8", 1000, gauss(0.01), const(0)),
            layer("accuracy", "Accuracy", ["fc8", "label"], ["accuracy"], [("include", [("phase", "TEST")])]),
            layer("loss", "SoftmaxWithLoss", ["fc8", "label"], ["loss"])]
    return "\n".join(out) + "\n"


def xavier(std):
    return filler("xavier", std=std)


def inception(name, bottom, n1, n3r, n3, n5r, n5, proj):
    p = f"inception_{name}"
    b02 = const(0.2)
    out = [conv(f"{p}/1x1", bottom, f"{p}/1x1", n1, 1, xavier(0.03), b02), relu(f"{p}/relu_1x1", f"{p}/1x1"),
           conv(f"{p}/3x3_reduce", bottom, f"{p}/3x3_reduce", n3r, 1, xavier(0.09), b02),
           relu(f"{p}/relu_3x3_reduce", f"{p}/3x3_reduce"),
           conv(f"{p}/3x3", f"{p}/3x3_reduce", f"{p}/3x3", n3, 3, xavier(0.03), b02, pad=1),
           relu(f"{p}/relu_3x3", f"{p}/3x3"),
           conv(f"{p}/5x5_reduce", bottom, f"{p}/5x5_reduce", n5r, 1, xavier(0.2), b02),
           relu(f"{p}/relu_5x5_reduce", f"{p}/5x5_reduce"),
           conv(f"{p}/5x5", f"{p}/5x5_reduce", f"{p}/5x5", n5, 5, xavier(0.03), b02, pad=2),
           relu(f"{p}/relu_5x5", f"{p}/5x5"),
           pool(f"{p}/pool", bottom, f"{p}/pool", "MAX", 3, 1, pad=1),
           conv(f"{p}/pool_proj", f"{p}/pool", f"{p}/pool_proj", proj, 1, xavier(0.1), b02),
           relu(f"{p}/relu_pool_proj", f"{p}/pool_proj"),
           layer(f"{p}/output", "Concat", [f"{p}/1x1", f"{p}/3x3", f"{p}/5x5", f"{p}/pool_proj"], [f"{p}/output"])]
    return out


def accuracies(prefix, scores):
    test = [("include", [("phase", "TEST")])]
    return [layer(f"{prefix}/top-1", "Accuracy", [scores, "label"], [f"{prefix}/top-1"], test),
            layer(f"{prefix}/top-5", "Accuracy", [scores, "label"], [f"{prefix}/top-5"], test,
                  [("accuracy_param", [("top_k", 5)])])]


def side_loss(n, bottom):
    p = f"loss{n}"
    return [pool(f"{p}/ave_pool", bottom, f"{p}/ave_pool", "AVE", 5, 3),
            conv(f"{p}/conv", f"{p}/ave_pool", f"{p}/conv", 128, 1, xavier(0.08), const(0.2)),
            relu(f"{p}/relu_conv", f"{p}/conv"),
            fc(f"{p}/fc", f"{p}/conv", f"{p}/fc", 1024, xavier(0.02), const(0.2)),
            relu(f"{p}/relu_fc", f"{p}/fc"), dropout(f"{p}/drop_fc", f"{p}/fc", 0.7),
            fc(f"{p}/classifier", f"{p}/fc", f"{p}/classifier", 1000, xavier(0.0009765625), const(0)),
            layer(f"{p}/loss", "SoftmaxWithLoss", [f"{p}/classifier", "label"], [f"{p}/loss{n}"],
                  [("loss_weight", 0.3)])] + accuracies(p, f"{p}/classifier")


def googlenet():
    means = [("mean_value", 104), ("mean_value", 117), ("mean_value", 123)]
    out = ['name: "GoogleNet"'] + data_layers([("mirror", "true"), ("crop_size", 224)] + means,
                                              [("mirror", "false"), ("crop_size", 224)] + means, 32, 50)
    out += [conv("conv1/7x7_s2", "data", "conv1/7x7_s2", 64, 7, xavier(0.1), const(0.2), stride=2, pad=3),
            relu("conv1/relu_7x7", "conv1/7x7_s2"),
            pool("pool1/3x3_s2", "conv1/7x7_s2", "pool1/3x3_s2", "MAX", 3, 2),
            lrn("pool1/norm1", "pool1/3x3_s2", "pool1/norm1"),
            conv("conv2/3x3_reduce", "pool1/norm1", "conv2/3x3_reduce", 64, 1, xavier(0.1), const(0.2)),
            relu("conv2/relu_3x3_reduce", "conv2/3x3_reduce"),
            conv("conv2/3x3", "conv2/3x3_reduce", "conv2/3x3", 192, 3, xavier(0.03), const(0.2), pad=1),
            relu("conv2/relu_3x3", "conv2/3x3"),
            lrn("conv2/norm2", "conv2/3x3", "conv2/norm2"),
            pool("pool2/3x3_s2", "conv2/norm2", "pool2/3x3_s2", "MAX", 3, 2)]
    out += inception("3a", "pool2/3x3_s2", 64, 96, 128, 16, 32, 32)
    out += inception("3b", "inception_3a/output", 128, 128, 192, 32, 96, 64)
    out += [pool("pool3/3x3_s2", "inception_3b/output", "pool3/3x3_s2", "MAX", 3, 2)]
    out += inception("4a", "pool3/3x3_s2", 192, 96, 208, 16, 48, 64)
    out += side_loss(1, "inception_4a/output")
    out += inception("4b", "inception_4a/output", 160, 112, 224, 24, 64, 64)
    out += inception("4c", "inception_4b/output", 128, 128, 256, 24, 64, 64)
    out += inception("4d", "inception_4c/output", 112, 144, 288, 32, 64, 64)
    out += side_loss(2, "inception_4d/output")
    out += inception("4e", "inception_4d/output", 256, 160, 320, 32, 128, 128)
    out += [pool("pool4/3x3_s2", "inception_4e/output", "pool4/3x3_s2", "MAX", 3, 2)]
    out += inception("5a", "pool4/3x3_s2", 256, 160, 320, 32, 128, 128)
    out += inception("5b", "inception_5a/output", 384, 192, 384, 48, 128, 128)
    out += [pool("pool5/7x7_s1", "inception_5b/output", "pool5/7x7_s1", "AVE", 7, 1),
            dropout("pool5/drop_7x7_s1", "pool5/7x7_s1", 0.4),
            fc("loss3/classifier", "pool5/7x7_s1", "loss3/classifier", 1000, xavier(0.0009765625), const(0)),
            layer("loss3/loss3", "SoftmaxWithLoss", ["loss3/classifier", "label"], ["loss3/loss3"],
                  [("loss_weight", 1)])]
    out += accuracies("loss3", "loss3/classifier")
    return "\n".join(out) + "\n"


def main():
    os.makedirs(OUT, exist_ok=True)
    for file, text in (("alexnet_train_val.prototxt", alexnet_like("AlexNet", False)),
                       ("caffenet_train_val.prototxt", alexnet_like("CaffeNet", True)),
                       ("googlenet_train_val.prototxt", googlenet())):
        with open(os.path.join(OUT, file), "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()

# -*- coding: utf-8 -*-
# Copyright (c) 2025 gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Build the simulated fleet's package repositories.

    python3 tests/testbed/repos/build.py --out .testbed/repos [--force] [--keys DIR]

Produces .testbed/repos/el8|el9|el10/{baseos,crb|powertools,epel,elrepo,cuda}/ (createrepo_c; nvidia-driver
module streams on el8/el9), .testbed/repos/apt/{debian,cuda}/ (flat apt repositories) and .testbed/repos/src/ (the
release tarballs of the imitation nccl-tests and nvbandwidth trees, with SHA256SUMS), from the spec and control files
and source trees in tests/testbed/packages/ and the GPU double's nvidia-smi.  Package names, versions, dependencies,
units and keys follow tests/testbed/REALITY.md.  The RPMs of cuda, epel and elrepo are signed (rpmsign), cuda's
repomd.xml has a detached signature, apt/cuda has InRelease and Release.gpg; each repository has its own
throwaway key, generated once into --keys (default: repo-keys next to --out) and served at the real key file
names.  The inputs (those files, this script, the key fingerprints and `uname -r`) are hashed; when the hash
matches the last build nothing is done.  Needs rpmbuild, rpmsign, createrepo_c, modifyrepo_c, dpkg-deb,
dpkg-scanpackages and gpg.
"""
from __future__ import absolute_import, division, print_function

import argparse
import concurrent.futures
import glob
import gzip
import hashlib
import io
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TESTBED = os.path.dirname(HERE)
PKGS = os.path.join(TESTBED, 'packages')
PAYLOAD = os.path.join(PKGS, 'payload')
DOUBLE = os.path.join(TESTBED, 'gpu_double')

DRIVERS = {'570': '570.172.08', '580': '580.95.05', '590': '590.48.01'}
NVLSM_VERSION = '2025.06.4'
# NVIDIA DCGM 4 in the CUDA repository (REALITY.md): core + one package per CUDA major, epoch 1, release 1.
DCGM_VERSIONS = ('4.4.1', '4.5.2')
DCGM_CUDA_MAJORS = ('12', '13')
IB_DIAGS_VERSION = {'el': '48.0', 'apt': '50.0-2'}
# ELRepo kernels: el8 and el9 have kernel-lt and kernel-ml, el10 kernel-ml only
ELREPO = {
    'el8': {'kernel-lt': '5.15.190', 'kernel-ml': '6.16.7'},
    'el9': {'kernel-lt': '6.1.150', 'kernel-ml': '6.16.7'},
    'el10': {'kernel-ml': '6.16.7'},
}
MODULAR = ('el8', 'el9')
DEB_OTHER_KERNEL = '6.1.0-40-amd64'
DEB_DKMS_VERSION = '3.0.11-1ubuntu13'
# Ubuntu's own archive (REALITY.md, "Ubuntu's signed driver"): the -server driver series with its Ubuntu release,
# and the Canonical-signed modules per kernel (source linux-restricted-modules, versioned like the kernel).
UBUNTU_DRIVERS = {'580': ('580.95.05', '0ubuntu0.24.04.2')}
UBUNTU_FM_RELEASE = '0ubuntu0.24.04.1'
# NVIDIA DCGM 3.x (REALITY.md "DCGM 3.x"): one package, datacenter-gpu-manager, epoch 1; the DCGM 4 core conflicts
# with it.
DCGM3_VERSION = '3.3.9'
# Issue 28, the perf_tools role (REALITY.md "Performance tools"): CUDA toolkit parts per X.Y with NVIDIA's versions of
# nvcc, cudart-devel, driver-devel and nvml-devel; NCCL with its CUDA builds; the distribution's build tools; the
# release tarballs of nccl-tests and nvbandwidth (imitation source trees, packages/sources/).
CUDA_TOOLKITS = {
    '12.8': {'nvcc': '12.8.93', 'cudart': '12.8.90', 'driver': '12.8.90', 'nvml': '12.8.90'},
    '13.0': {'nvcc': '13.0.88', 'cudart': '13.0.96', 'driver': '13.0.96', 'nvml': '13.0.87'},
    '13.1': {'nvcc': '13.1.80', 'cudart': '13.1.80', 'driver': '13.1.80', 'nvml': '13.1.68'},
}
NCCL_VERSION = '2.27.7'
NCCL_CODE = '22707'
NCCL_CUDA_BUILDS = ('12.9', '13.0')
# version, release of make, gcc-c++, cmake, Boost per EL release; the Ubuntu 24.04 versions (apt/debian).
EL_DEVTOOLS = {
    'el8': {'make': ('4.2.1', '11.el8'), 'gxx': ('8.5.0', '26.el8_10'), 'cmake': ('3.26.5', '2.el8'),
            'boost': ('1.66.0', '13.el8')},
    'el9': {'make': ('4.3', '8.el9'), 'gxx': ('11.5.0', '5.el9_5'), 'cmake': ('3.26.5', '2.el9'),
            'boost': ('1.75.0', '8.el9')},
    'el10': {'make': ('4.4.1', '9.el10'), 'gxx': ('14.2.1', '7.el10'), 'cmake': ('3.30.5', '3.el10'),
             'boost': ('1.83.0', '4.el10')},
}
APT_DEVTOOLS = {'make': '4.3-4.1build2', 'g++': '4:13.2.0-7ubuntu1', 'cmake': '3.28.3-1build7',
                'libboost-program-options-dev': '1.83.0.1ubuntu2'}
APT_BOOST_VERSION = '1.83.0'
SOURCE_TREES = {'nccl-tests': '2.17.9', 'nvbandwidth': '0.8'}
TOOLS = ('rpmbuild', 'rpmsign', 'createrepo_c', 'modifyrepo_c', 'dpkg-deb', 'dpkg-scanpackages', 'gpg', 'gpgconf')

# Throwaway signing keys, one per real repository key (REALITY.md, R5/R6): name -> (user id, algorithm).
# elrepo-v1-el10 is served as ELRepo's v1 key on el10 only: a key on a curve rpm cannot import
# (brainpoolP256r1), so listing it fails like EL10's rpm refusing the SHA-1 v1 key (imitation).
KEYS = {
    'cuda-rhel': ('Testbed stand-in for the NVIDIA CUDA rhel8/rhel9 repository key', 'ed25519'),
    'cuda-rhel10': ('Testbed stand-in for the NVIDIA CUDA rhel10 repository key', 'ed25519'),
    'cuda-apt': ('Testbed stand-in for the NVIDIA CUDA apt repository key', 'ed25519'),
    'elrepo-v1': ('Testbed stand-in for the ELRepo v1 key', 'ed25519'),
    'elrepo-v1-el10': ('Testbed stand-in for the ELRepo v1 key as EL10 sees it (not importable)',
                       'brainpoolP256r1'),
    'elrepo-v2': ('Testbed stand-in for the ELRepo v2 key', 'ed25519'),
    'epel-8': ('Testbed stand-in for the EPEL 8 key', 'ed25519'),
    'epel-9': ('Testbed stand-in for the EPEL 9 key', 'ed25519'),
    'epel-10': ('Testbed stand-in for the EPEL 10 key', 'ed25519'),
    'rocky-8': ('Testbed stand-in for the Rocky Linux 8 key', 'ed25519'),
    'rocky-9': ('Testbed stand-in for the Rocky Linux 9 key', 'ed25519'),
    'rocky-10': ('Testbed stand-in for the Rocky Linux 10 key', 'ed25519'),
}
# Which key signs the RPMs of each EL repository, and which key files each one serves (at the real file names).
EL_SIGNER = {
    'baseos': lambda el: 'rocky-' + el[2:],
    # Rocky signs CRB / PowerTools with the same key as BaseOS (the node's .repo names that key for both)
    'crb': lambda el: 'rocky-' + el[2:],
    'powertools': lambda el: 'rocky-' + el[2:],
    'cuda': lambda el: 'cuda-rhel10' if el == 'el10' else 'cuda-rhel',
    'epel': lambda el: 'epel-' + el[2:],
    'elrepo': lambda el: 'elrepo-v1' if el == 'el8' else 'elrepo-v2',
}
EL_KEY_FILES = {
    'baseos': lambda el: [('rocky-' + el[2:], 'RPM-GPG-KEY-Rocky-' + el[2:])],
    'cuda': lambda el: [('cuda-rhel10', 'CDF6BA43.pub')] if el == 'el10' else [('cuda-rhel', 'D42D0685.pub')],
    'epel': lambda el: [('epel-' + el[2:], 'RPM-GPG-KEY-EPEL-' + el[2:])],
    'elrepo': lambda el: [('elrepo-v1-el10' if el == 'el10' else 'elrepo-v1', 'RPM-GPG-KEY-elrepo.org'),
                          ('elrepo-v2', 'RPM-GPG-KEY-v2-elrepo.org')],
}
APT_KEY = ('cuda-apt', '3bf863cc.pub')


class Keys(object):
    """The throwaway keys in one GnuPG home (default .testbed/repo-keys, never committed), generated once."""

    def __init__(self, home):
        self.home = home

    def gpg(self, args):
        return run(['gpg', '--homedir', self.home, '--batch', '--no-tty', '--quiet', '--pinentry-mode', 'loopback',
                    '--passphrase', ''] + args)

    @staticmethod
    def email(name):
        return '<{0}@testbed.invalid>'.format(name)

    def ensure(self):
        if not os.path.isdir(self.home):
            os.makedirs(self.home)
        os.chmod(self.home, 0o700)
        have = self.gpg(['--with-colons', '--list-keys'])
        for name, (uid, algo) in sorted(KEYS.items()):
            if self.email(name) not in have:
                self.gpg(['--quick-gen-key', '{0} {1}'.format(uid, self.email(name)), algo, 'sign', 'never'])

    def fingerprints(self):
        return ''.join(l for l in self.gpg(['--with-colons', '--list-keys']).splitlines() if l.startswith('fpr:'))

    def export(self, name, path):
        with open(path, 'w') as f:
            f.write(self.gpg(['--armor', '--export', self.email(name)]))

    def rpmsign(self, name, files):
        if files:
            run(['rpmsign', '--addsign', '--define', '__gpg /usr/bin/gpg', '--define', '_gpg_path ' + self.home,
                 '--define', '_gpg_name ' + self.email(name)] + files)

    def detach_sign(self, name, path, suffix='.asc'):
        self.gpg(['--yes', '--local-user', self.email(name), '--armor', '--detach-sign', '--output', path + suffix,
                  path])

    def clearsign(self, name, path, out):
        self.gpg(['--yes', '--local-user', self.email(name), '--clearsign', '--output', out, path])

    def close(self):
        subprocess.call(['gpgconf', '--homedir', self.home, '--kill', 'all'],
                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


class BuildError(Exception):
    pass


def run(argv, cwd=None):
    """Run argv; return its stdout only (stderr, e.g. dpkg-scanpackages' warnings, must not end up in the
    output that callers write to files such as Packages)."""
    proc = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=dict(os.environ, LC_ALL='C', LANGUAGE='C'))
    out, err = proc.communicate()
    out = out.decode('utf-8', 'replace')
    err = err.decode('utf-8', 'replace')
    if proc.returncode != 0:
        raise BuildError('command failed (rc {0}): {1}\n{2}{3}'.format(proc.returncode, ' '.join(argv), out, err))
    return out


def inputs_hash(kernel, fingerprints=''):
    h = hashlib.sha256()
    h.update(kernel.encode())
    h.update(fingerprints.encode())
    files = [os.path.abspath(__file__)]
    for base in (PKGS, os.path.join(DOUBLE, 'lib'), os.path.join(DOUBLE, 'bin')):
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames.sort()
            files += [os.path.join(dirpath, f) for f in sorted(filenames) if not f.endswith('.pyc')]
    for f in files:
        h.update(os.path.relpath(f, TESTBED).encode())
        with open(f, 'rb') as fh:
            h.update(hashlib.sha256(fh.read()).digest())
    return h.hexdigest()


def ubuntu_newer_kernel(kernel):
    """The kernel Ubuntu's archive of the fleet offers through linux-image-generic (REALITY.md, "A kernel without
    signed modules"): a release that sorts after the build host's (every node runs the host's kernel), with no
    linux-modules-nvidia-* package.  '6.18.44-fc-v1272' -> '6.19.0-1-generic'."""
    parts = kernel.split('-', 1)[0].split('.')
    minor = int(''.join(ch for ch in parts[1] if ch.isdigit()) or 0) if len(parts) > 1 else 0
    return '{0}.{1}.0-1-generic'.format(parts[0], minor + 1)


def split_uname(kernel):
    """'6.18.44-fc-v657' -> ('6.18.44', 'fc_v657'): RPM Version/Release cannot hold '-'."""
    if '-' in kernel:
        ver, rel = kernel.split('-', 1)
    else:
        ver, rel = kernel, '0'
    return ver, rel.replace('-', '_')


def uname_evr(kernel):
    """'6.18.44-fc-v657' -> '6.18.44_fc-v657' (see packages/rpm/kernel.spec)."""
    head, sep, tail = kernel.rpartition('-')
    return head.replace('-', '_') + sep + tail if sep else kernel


def fill(template, **values):
    with open(os.path.join(PAYLOAD, template)) as f:
        text = f.read()
    for k, v in values.items():
        text = text.replace('@{0}@'.format(k), v)
    return text


def put(root, rel, text, mode=0o644):
    target = os.path.join(root, rel.lstrip('/'))
    if not os.path.isdir(os.path.dirname(target)):
        os.makedirs(os.path.dirname(target))
    with open(target, 'w') as f:
        f.write(text)
    os.chmod(target, mode)


def branch_of(version):
    return version.split('.')[0]


def el_fm_names(version, el):
    """(fabric manager package, nscq package, release) of one driver version on EL (REALITY.md, R1):
    below 580 nvidia-fabric-manager + libnvidia-nscq-<branch>, from 580 on nvidia-fabricmanager + libnvidia-nscq;
    release 1 below 590, 1.el<N> from 590 on."""
    branch = int(branch_of(version))
    if branch < 580:
        return 'nvidia-fabric-manager', 'libnvidia-nscq-{0}'.format(branch), '1'
    return 'nvidia-fabricmanager', 'libnvidia-nscq', '1' if branch < 590 else '1.' + el


def apt_suffix(version):
    """Ubuntu package names carry '-<branch>' up to 580 and nothing from 590 on (REALITY.md, R1)."""
    return '-' + branch_of(version) if int(branch_of(version)) < 590 else ''


def apt_version(version):
    return version + ('-0ubuntu1' if int(branch_of(version)) < 590 else '-1ubuntu1')


def apt_extra_version(version):
    """Debian version of NVIDIA's apt fabric manager, nscq, nvsdm and imex (REALITY.md, R21): '<V>-1' below 590,
    '<V>-1ubuntu1' from 590 on."""
    return version + ('-1' if int(branch_of(version)) < 590 else '-1ubuntu1')


def nvsdm_name(version):
    """NVSDM's package name (REALITY.md, R22): libnvsdm from 580 on, libnvsdm-<branch> below (EL and apt)."""
    branch = branch_of(version)
    return 'libnvsdm' if int(branch) >= 580 else 'libnvsdm-' + branch


def apt_fm_names(version):
    """(fabric manager package, nscq package, extra control fields) on apt (REALITY.md, R1)."""
    branch = branch_of(version)
    if int(branch) < 580:
        return 'nvidia-fabricmanager-' + branch, 'libnvidia-nscq-' + branch, {}, {}
    return ('nvidia-fabricmanager', 'libnvidia-nscq', {'Provides': 'nvidia-fabricmanager-' + branch},
            {'Provides': 'libnvidia-nscq-' + branch})


def dkms_conf(name, version, flavour):
    return fill('dkms.conf.in', VERSION=version, FLAVOUR=flavour).replace('PACKAGE_NAME="nvidia"',
                                                                          'PACKAGE_NAME="{0}"'.format(name), 1)


def driver_payload(root, version):
    """All files of one driver version (packages pick theirs through %files / the deb lists)."""
    branch = branch_of(version)
    with open(os.path.join(DOUBLE, 'bin', 'nvidia-smi.in')) as f:
        put(root, '/usr/bin/nvidia-smi', '#!/usr/bin/python3 -sS\n' + f.read().replace('@VERSION@', version), 0o755)
    put(root, '/usr/share/doc/testbed/nvidia-driver-' + version, 'NVIDIA driver {0} (simulated)\n'.format(version))
    put(root, '/usr/lib/testbed/nvidia-kmod-common-' + version, 'nvidia-kmod-common {0}\n'.format(version))
    for lib in ('/usr/lib64/xorg/modules/drivers/nvidia_drv.so', '/usr/lib64/libGLX_nvidia.so.' + version,
                '/usr/lib64/libcuda.so.' + version, '/usr/lib64/libnvidia-nscq.so.' + version,
                '/usr/lib64/libnvsdm.so.' + version):
        put(root, lib, 'stand-in {0} {1}\n'.format(os.path.basename(lib), version))
    for tool in ('nvidia-settings', 'nvidia-xconfig'):
        put(root, '/usr/bin/' + tool, '#!/bin/sh\necho "{0} {1}: desktop tool of the simulated fleet"\n'.format(
            tool, version), 0o755)
    # EL: kmod-nvidia-open-dkms registers nvidia-open, kmod-nvidia-latest-dkms nvidia (REALITY.md)
    put(root, '/usr/src/nvidia-open-{0}/dkms.conf'.format(version), dkms_conf('nvidia-open', version, 'open'))
    put(root, '/usr/src/nvidia-{0}/dkms.conf'.format(version), dkms_conf('nvidia', version, 'proprietary'))
    # Ubuntu: nvidia-dkms-<B>-open and nvidia-dkms-<B> both register nvidia from /usr/src/nvidia-<V>
    for flavour in ('open', 'proprietary'):
        put(root + '-ubuntu-' + flavour, '/usr/src/nvidia-{0}/dkms.conf'.format(version),
            dkms_conf('nvidia', version, flavour))
    for exe, daemon in (('nvidia-persistenced', 'persistenced'), ('nv-fabricmanager', 'fabricmanager')):
        put(root, '/usr/bin/' + exe, fill('daemon.in', NAME=exe, DAEMON=daemon, VERSION=version), 0o755)
    put(root, '/usr/bin/nvidia-fabricmanager-start.sh', fill('fabricmanager-start.sh.in', VERSION=version), 0o755)
    put(root, '/usr/bin/nvidia-imex', fill('nvidia-imex.in', VERSION=version), 0o755)
    put(root, '/usr/bin/nvidia-imex-ctl', fill('nvidia-imex-ctl.in', VERSION=version), 0o755)
    put(root, '/etc/nvidia-imex/config.cfg', fill('imex-config.cfg.in', VERSION=version))
    put(root, '/usr/share/nvidia/nvswitch/fabricmanager.cfg', fill('fabricmanager.cfg.in', VERSION=version))
    for unit in ('nvidia-persistenced', 'nvidia-fabricmanager', 'nvidia-imex'):
        put(root, '/usr/lib/systemd/system/{0}.service'.format(unit), fill('units/{0}.service'.format(unit)))
    put(root + '-ubuntu', '/usr/lib/systemd/system/nvidia-persistenced.service',
        fill('units/nvidia-persistenced-ubuntu.service'))
    put(root, '/etc/apt/preferences.d/nvidia-driver-pinning-' + branch, fill('pinning.in', BRANCH=branch))


def dcgm_payload(root, version):
    """The files of DCGM 4 <version>: the double's dcgmi and nv-hostengine, NVIDIA's unit, a stand-in per CUDA
    major."""
    put(root, '/usr/bin/dcgmi', '#!/usr/bin/python3 -sS\n' + fill('dcgmi.in', VERSION=version), 0o755)
    put(root, '/usr/bin/nv-hostengine', fill('daemon.in', NAME='nv-hostengine', DAEMON='hostengine',
                                             VERSION=version), 0o755)
    put(root, '/usr/lib/systemd/system/nvidia-dcgm.service', fill('units/nvidia-dcgm.service'))
    for major in DCGM_CUDA_MAJORS:
        put(root, '/usr/libexec/datacenter-gpu-manager-4/plugins/cuda{0}/README'.format(major),
            'DCGM {0} CUDA {1} plugins (stand-in)\n'.format(version, major))


def dcgm3_payload(root, version):
    """DCGM 3.x: the same double's dcgmi and nv-hostengine, 3.x's two units (nvidia-dcgm.service conflicting with the
    deprecated dcgm.service, no Alias)."""
    put(root, '/usr/bin/dcgmi', '#!/usr/bin/python3 -sS\n' + fill('dcgmi.in', VERSION=version), 0o755)
    put(root, '/usr/bin/nv-hostengine', fill('daemon.in', NAME='nv-hostengine', DAEMON='hostengine',
                                             VERSION=version), 0o755)
    put(root, '/usr/lib/systemd/system/nvidia-dcgm.service', fill('units/nvidia-dcgm-3.service'))
    put(root, '/usr/lib/systemd/system/dcgm.service', fill('units/dcgm-3.service'))


def ib_payload(root, version):
    """infiniband-diags: ibstat of the GPU double (REALITY.md, R22)."""
    put(root, '/usr/sbin/ibstat', fill('ibstat.in', VERSION=version), 0o755)


def nvlsm_payload(root):
    put(root, '/opt/nvidia/nvlsm/sbin/nvlsm', fill('nvlsm.in', VERSION=NVLSM_VERSION), 0o755)
    put(root, '/usr/share/nvidia/nvlsm/nvlsm.conf', fill('nvlsm.conf.in', VERSION=NVLSM_VERSION))


def toolchain_script(name, version, tool, args='', env=''):
    return fill('toolchain.in', NAME=name, VERSION=version, TOOL=tool, ARGS=args, ENV=env)


def cuda_payload(root, dot):
    """One CUDA toolkit's parts under /usr/local/cuda-<X.Y> (a flat lib64: the real one is a link to
    targets/x86_64-linux/lib)."""
    v = CUDA_TOOLKITS[dot]
    home = '/usr/local/cuda-' + dot
    put(root, home + '/bin/nvcc', toolchain_script('nvcc', v['nvcc'], 'nvcc', '--cuda-version {0} --cuda-home {1} -- '
                                                   .format(v['nvcc'], home)), 0o755)
    for name, package in (('include/cuda_runtime.h', 'cudart'), ('include/cuda_runtime_api.h', 'cudart'),
                          ('lib64/libcudart.so', 'cudart'), ('include/cuda.h', 'driver'),
                          ('lib64/stubs/libcuda.so', 'driver'), ('include/nvml.h', 'nvml'),
                          ('lib64/stubs/libnvidia-ml.so', 'nvml')):
        put(root, '{0}/{1}'.format(home, name), '/* Simulated fleet: CUDA {0} {1} (stand-in) */\n'.format(
            v[package], os.path.basename(name)))


def nccl_payload(root, libdir, cuda):
    """NCCL <version> for CUDA <cuda>: libnccl.so.2 (a link to the versioned file), libnccl.so, nccl.h."""
    put(root, '{0}/libnccl.so.{1}'.format(libdir, NCCL_VERSION), 'stand-in libnccl {0}+cuda{1}\n'.format(
        NCCL_VERSION, cuda))
    os.symlink('libnccl.so.' + NCCL_VERSION, os.path.join(root, libdir.lstrip('/'), 'libnccl.so.2'))
    os.symlink('libnccl.so.2', os.path.join(root, libdir.lstrip('/'), 'libnccl.so'))
    major, minor, patch = NCCL_VERSION.split('.')
    put(root, '/usr/include/nccl.h', '/* Simulated fleet: NCCL {0}+cuda{1} (stand-in) */\n#define NCCL_MAJOR {2}\n'
        '#define NCCL_MINOR {3}\n#define NCCL_PATCH {4}\n#define NCCL_VERSION_CODE {5}\n'.format(
            NCCL_VERSION, cuda, major, minor, patch, NCCL_CODE))


def devtools_payload(root, libdir, versions):
    """make (the host's GNU make), g++/c++ and cmake (stand-ins), Boost program_options (header, .so, .a)."""
    make = shutil.which('make')
    if make is None:
        raise BuildError('missing tool: make (its binary is the fleet\'s make package)')
    put(root, '/usr/bin/make', '')
    shutil.copy2(make, os.path.join(root, 'usr/bin/make'))
    os.chmod(os.path.join(root, 'usr/bin/make'), 0o755)
    for exe in ('g++', 'c++'):
        put(root, '/usr/bin/' + exe, toolchain_script(exe, versions['gxx'], 'c++'), 0o755)
    put(root, '/usr/bin/cmake', toolchain_script('cmake', versions['cmake'], 'cmake',
                                                 env='GPU_DOUBLE_CMAKE_VERSION={0} '.format(versions['cmake'])),
        0o755)
    put(root, '/usr/include/boost/program_options.hpp', '// Simulated fleet: Boost program_options (stand-in)\n')
    put(root, '/usr/include/boost/version.hpp', '// Simulated fleet: Boost {0}\n'.format(versions['boost']))
    for ext in ('so', 'a'):
        put(root, '{0}/libboost_program_options.{1}'.format(libdir, ext), 'stand-in Boost {0} program_options\n'
            .format(versions['boost']))


def source_tarballs(out):
    """src/<name>-<version>.tar.gz of the imitation source trees (packages/sources/), byte-stable, and SHA256SUMS."""
    folder = os.path.join(out, 'src')
    os.makedirs(folder)
    sums = []
    for name, version in sorted(SOURCE_TREES.items()):
        top = '{0}-{1}'.format(name, version)
        base = os.path.join(PKGS, 'sources', name)
        path = os.path.join(folder, top + '.tar.gz')
        raw = io.BytesIO()
        with tarfile.open(fileobj=raw, mode='w', format=tarfile.USTAR_FORMAT) as tar:
            entries = []
            for dirpath, dirnames, filenames in os.walk(base):
                dirnames.sort()
                rel = os.path.relpath(dirpath, base)
                if rel != '.':
                    entries.append((rel, None))
                entries += [(os.path.normpath(os.path.join(rel, f)), os.path.join(dirpath, f)) for f in sorted(filenames)]
            for rel, src in [('.', None)] + entries:
                info = tarfile.TarInfo(os.path.normpath(os.path.join(top, rel)))
                info.mtime, info.uid, info.gid, info.uname, info.gname = 1735689600, 0, 0, 'root', 'root'
                if src is None:
                    info.type, info.mode = tarfile.DIRTYPE, 0o755
                    tar.addfile(info)
                    continue
                with open(src) as f:
                    data = f.read().replace('@VERSION@', version).encode('utf-8')
                info.size, info.mode = len(data), 0o644
                tar.addfile(info, io.BytesIO(data))
        with open(path, 'wb') as f:
            with gzip.GzipFile(filename='', mode='wb', fileobj=f, mtime=0) as gz:
                gz.write(raw.getvalue())
        with open(path, 'rb') as f:
            sums.append('{0}  {1}\n'.format(hashlib.sha256(f.read()).hexdigest(), os.path.basename(path)))
    with open(os.path.join(folder, 'SHA256SUMS'), 'w') as f:
        f.write(''.join(sums))


# ------------------------------------------------------------------ RPM

def rpmbuild(spec, outdir, work, defines):
    top = tempfile.mkdtemp(prefix='rpm-', dir=work)
    argv = ['rpmbuild', '-bb', '--quiet', '--define', '_topdir ' + top, '--define', '_rpmdir ' + outdir,
            '--define', '_build_name_fmt %%{NAME}-%%{VERSION}-%%{RELEASE}.%%{ARCH}.rpm',
            '--define', '_build_id_links none', '--define', '_source_payload w1.gzdio',
            '--define', '_binary_payload w1.gzdio', '--define', '__os_install_post %{nil}',
            '--define', 'debug_package %{nil}', '--define', '_unpackaged_files_terminate_build 0',
            '--target', 'x86_64']
    for k, v in defines:
        argv += ['--define', '{0} {1}'.format(k, v)]
    run(argv + [os.path.join(PKGS, 'rpm', spec)])
    shutil.rmtree(top, ignore_errors=True)


def modules_yaml(el):
    """nvidia-driver module streams like NVIDIA's el8/el9 repos: <branch>-open, <branch>-dkms,
    open-dkms and latest-dkms (default)."""
    def nevras(version, flavour):
        names = ['nvidia-driver', 'nvidia-driver-libs', 'nvidia-driver-cuda', 'nvidia-driver-cuda-libs',
                 'nvidia-kmod-common', 'nvidia-persistenced', 'nvidia-settings', 'nvidia-xconfig']
        names += ['nvidia-open', 'kmod-nvidia-open-dkms'] if flavour == 'open' else \
            ['cuda-drivers', 'kmod-nvidia-latest-dkms']
        arts = ['{0}-3:{1}-1.{2}.x86_64'.format(n, version, el) for n in names]
        fm, nscq, rel = el_fm_names(version, el)
        arts += ['{0}-0:{1}-{2}.x86_64'.format(n, version, rel) for n in (fm, nscq)]
        arts.append('nvidia-imex-0:{0}-1.x86_64'.format(version))
        return sorted(arts), fm

    docs = []
    latest = DRIVERS[max(DRIVERS)]
    streams = []
    for branch, version in sorted(DRIVERS.items()):
        streams.append(('{0}-open'.format(branch), version, 'open'))
        streams.append(('{0}-dkms'.format(branch), version, 'dkms'))
    streams.append(('open-dkms', latest, 'open'))
    streams.append(('latest-dkms', latest, 'dkms'))
    for n, (stream, version, flavour) in enumerate(streams):
        arts, fm = nevras(version, flavour)
        meta = 'nvidia-open' if flavour == 'open' else 'cuda-drivers'
        docs.append('\n'.join([
            '---', 'document: modulemd', 'version: 2', 'data:', '  name: nvidia-driver',
            '  stream: "{0}"'.format(stream), '  version: {0}'.format(20250101000000 + n),
            '  context: "testbed"', '  arch: x86_64',
            '  summary: Nvidia driver for {0} branch (simulated fleet)'.format(stream),
            '  description: >-', '    NVIDIA driver packages of the simulated fleet.',
            '  license:', '    module:', '    - MIT',
            '  profiles:', '    default:', '      rpms:', '      - {0}'.format(meta),
            '    fm:', '      rpms:', '      - {0}'.format(meta), '      - {0}'.format(fm),
            '  artifacts:', '    rpms:'] + ['    - {0}'.format(a) for a in arts] + ['...']))
    docs.append('\n'.join(['---', 'document: modulemd-defaults', 'version: 1', 'data:',
                           '  module: nvidia-driver', '  stream: latest-dkms', '  profiles:',
                           '    latest-dkms: [default]', '...']))
    return '\n'.join(docs) + '\n'


def el_repo_names(el):
    return ('baseos', 'powertools' if el == 'el8' else 'crb', 'epel', 'elrepo', 'cuda')


def build_el(el, out, work, kernel, jobs):
    ver, rel = split_uname(kernel)
    dirs = dict((r, os.path.join(out, el, r)) for r in el_repo_names(el))
    for d in dirs.values():
        os.makedirs(d)
    dist = ('dist', '.' + el)
    major = ('el_major', el[2:])
    ib = [('ib_version', IB_DIAGS_VERSION['el']), ('ib_payload', os.path.join(work, 'payload-ib-el'))]
    jobs.append(('testbed-base.spec', dirs['baseos'], [dist, major] + ib))
    jobs.append(('kernel.spec', dirs['baseos'], [('kname', 'kernel'), ('kversion', ver),
                                                 ('krelease', rel), ('kuname', kernel),
                                                 ('kuname_evr', uname_evr(kernel))]))
    jobs.append(('dkms.spec', dirs['epel'], [dist]))
    for kname, kver in sorted(ELREPO[el].items()):
        krel = '1.{0}.elrepo'.format(el)
        jobs.append(('kernel.spec', dirs['elrepo'], [('kname', kname), ('kversion', kver), ('krelease', krel),
                                                     ('kuname', '{0}-{1}.x86_64'.format(kver, krel)),
                                                     ('kuname_evr', '{0}-{1}.x86_64'.format(kver, krel))]))
    for branch, version in sorted(DRIVERS.items()):
        payload = ('payload', os.path.join(work, 'payload-' + version))
        jobs.append(('nvidia-driver.spec', dirs['cuda'], [dist, major, ('drv_version', version),
                                                          ('branch', branch), payload]))
        fm, nscq, fm_rel = el_fm_names(version, el)
        jobs.append(('fabricmanager.spec', dirs['cuda'], [('drv_version', version), ('branch', branch),
                                                          ('fm_name', fm), ('nscq_name', nscq),
                                                          ('nvsdm_name', nvsdm_name(version)),
                                                          ('fm_release', fm_rel), payload]))
    if el in MODULAR:
        jobs.append(('dnf-plugin-nvidia.spec', dirs['cuda'], [dist]))
    jobs.append(('nvlsm.spec', dirs['cuda'], [dist, ('nvlsm_version', NVLSM_VERSION),
                                              ('payload', os.path.join(work, 'payload-nvlsm'))]))
    for version in DCGM_VERSIONS:
        jobs.append(('dcgm.spec', dirs['cuda'], [('dcgm_version', version),
                                                 ('payload', os.path.join(work, 'payload-dcgm-' + version))]))
    jobs.append(('dcgm3.spec', dirs['cuda'], [('dcgm_version', DCGM3_VERSION),
                                              ('payload', os.path.join(work, 'payload-dcgm-' + DCGM3_VERSION))]))
    for dot, v in sorted(CUDA_TOOLKITS.items()):
        jobs.append(('cuda-toolkit-parts.spec', dirs['cuda'], [
            ('cuda_dot', dot), ('cuda_dash', dot.replace('.', '-')), ('nvcc_version', v['nvcc']),
            ('cudart_version', v['cudart']), ('driver_dev_version', v['driver']), ('nvml_version', v['nvml']),
            ('payload', os.path.join(work, 'payload-cuda-' + dot))]))
    for cuda in NCCL_CUDA_BUILDS:
        jobs.append(('nccl.spec', dirs['cuda'], [('nccl_version', NCCL_VERSION), ('nccl_cuda', cuda),
                                                 ('payload', os.path.join(work, 'payload-nccl-el-' + cuda))]))
    tools = EL_DEVTOOLS[el]
    devtools = [('payload', os.path.join(work, 'payload-devtools-' + el))]
    for key in ('make', 'gxx', 'cmake', 'boost'):
        devtools += [(key + '_version', tools[key][0]), (key + '_release', tools[key][1])]
    jobs.append(('devtools.spec', dirs['baseos'], devtools))
    jobs.append(('boost-static.spec', dirs['powertools' if el == 'el8' else 'crb'], [
        ('boost_version', tools['boost'][0]), ('boost_release', tools['boost'][1]),
        ('payload', os.path.join(work, 'payload-devtools-' + el))]))
    return dirs


def finish_el(el, dirs, work, keys):
    """Sign the RPMs, write the metadata (signed for cuda), and serve the key files (REALITY.md)."""
    for name, d in sorted(dirs.items()):
        signer = EL_SIGNER[name](el) if name in EL_SIGNER else None
        if signer:
            keys.rpmsign(signer, sorted(glob.glob(os.path.join(d, '*', '*.rpm')) +
                                        glob.glob(os.path.join(d, '*.rpm'))))
        run(['createrepo_c', '--quiet', '--no-database', d])
        if name == 'cuda' and el in MODULAR:
            path = os.path.join(work, 'modules-{0}.yaml'.format(el))
            with open(path, 'w') as f:
                f.write(modules_yaml(el))
            run(['modifyrepo_c', '--mdtype=modules', path, os.path.join(d, 'repodata')])
        if name == 'cuda':
            keys.detach_sign(signer, os.path.join(d, 'repodata', 'repomd.xml'))
        for key, filename in EL_KEY_FILES.get(name, lambda e: [])(el):
            keys.export(key, os.path.join(d, filename))


# ------------------------------------------------------------------ DEB

def deb(outdir, work, name, version, files, depends='', extra=None, scripts=None, arch='amd64'):
    """files: list of (source root, path) copied into the package."""
    stage = tempfile.mkdtemp(prefix='deb-', dir=work)
    for src_root, rel in files:
        src = os.path.join(src_root, rel.lstrip('/'))
        dst = os.path.join(stage, rel.lstrip('/'))
        if not os.path.isdir(os.path.dirname(dst)):
            os.makedirs(os.path.dirname(dst))
        if os.path.islink(src):
            os.symlink(os.readlink(src), dst)
        elif os.path.isdir(src):
            shutil.copytree(src, dst, symlinks=True)
        else:
            shutil.copy2(src, dst)
    control = ['Package: ' + name, 'Version: ' + version, 'Architecture: ' + arch,
               'Maintainer: gpufleet maintainers <gpufleet@example.invalid>', 'Section: misc', 'Priority: optional']
    if depends:
        control.append('Depends: ' + depends)
    for k, v in (extra or {}).items():
        control.append('{0}: {1}'.format(k, v))
    control.append('Description: simulated fleet package {0}'.format(name))
    control.append(' Built by tests/testbed/repos/build.py for the gpufleet.nodeprep testbed.')
    put(stage, 'DEBIAN/control', '\n'.join(control) + '\n')
    for sname, body in (scripts or {}).items():
        put(stage, 'DEBIAN/' + sname, '#!/bin/sh\nset -e\n' + body + '\nexit 0\n', 0o755)
    run(['dpkg-deb', '--root-owner-group', '-Zgzip', '-z1', '--build', stage,
         os.path.join(outdir, '{0}_{1}_{2}.deb'.format(name, version.split(':')[-1], arch))])
    shutil.rmtree(stage, ignore_errors=True)


def kernel_tree(root, kernel, flavour_dir):
    m = os.path.join(root, 'lib/modules', kernel)
    put(root, '/boot/vmlinuz-' + kernel, 'testbed kernel image {0}\n'.format(kernel))
    put(root, '/boot/config-' + kernel, '# testbed kernel config {0}\n'.format(kernel))
    put(root, '/lib/modules/{0}/modules.dep'.format(kernel), 'kernel/drivers/gpu/drm/nouveau/nouveau.ko:\n')
    put(root, '/lib/modules/{0}/kernel/drivers/gpu/drm/nouveau/nouveau.ko'.format(kernel), 'testbed nouveau\n')
    hdr = '/usr/src/{0}'.format(flavour_dir)
    put(root, hdr + '/Makefile', 'KERNELRELEASE = {0}\nall:\n\t@true\n'.format(kernel))
    os.symlink(hdr, os.path.join(m, 'build'))


def dkms_scripts(mod, version):
    return {'postinst': 'for b in /lib/modules/*/build; do k=${{b#/lib/modules/}}; k=${{k%/build}}; '
                        '/usr/sbin/dkms install -m {0} -v {1} -k "$k" || true; done'.format(mod, version),
            'prerm': '/usr/sbin/dkms remove -m {0} -v {1} --all || true'.format(mod, version)}


PERSISTENCED_USER = ('getent passwd nvidia-persistenced >/dev/null || useradd --system --no-create-home '
                     '--home-dir /nonexistent --shell /usr/sbin/nologin nvidia-persistenced || true')


def build_apt_cuda(cuda, work):
    """NVIDIA's ubuntu2404 repository, Ubuntu-style names (REALITY.md, R1/R7/R8)."""
    for branch, version in sorted(DRIVERS.items()):
        v = apt_version(version)
        sfx = apt_suffix(version)
        p = os.path.join(work, 'payload-' + version)
        eq = '(= {0})'.format(v)

        def pkg(name, files=(), deps=(), extra=None, scripts=None, arch='amd64'):
            deb(cuda, work, name, v, list(files), ', '.join('{0} {1}'.format(d, eq) for d in deps), extra, scripts,
                arch)
        pkg('nvidia-kernel-common' + sfx, [(p, '/usr/lib/testbed/nvidia-kmod-common-' + version)])
        pkg('nvidia-dkms{0}-open'.format(sfx), [(p + '-ubuntu-open', '/usr/src/nvidia-' + version)],
            ['nvidia-kernel-common' + sfx], {'Conflicts': 'nvidia-dkms' + sfx, 'Pre-Depends': 'dkms'},
            dkms_scripts('nvidia', version))
        pkg('nvidia-dkms' + sfx, [(p + '-ubuntu-proprietary', '/usr/src/nvidia-' + version)],
            ['nvidia-kernel-common' + sfx], {'Conflicts': 'nvidia-dkms{0}-open'.format(sfx), 'Pre-Depends': 'dkms'},
            dkms_scripts('nvidia', version))
        # R26: libnvidia-compute needs the kernel common files and brings no nvidia-smi (nvidia-utils) and no
        # nvidia-persistenced (REALITY.md).
        pkg('libnvidia-compute' + sfx, [(p, '/usr/lib64/libcuda.so.' + version)], ['nvidia-kernel-common' + sfx])
        pkg('libnvidia-gl' + sfx, [(p, '/usr/lib64/libGLX_nvidia.so.' + version)])
        pkg('xserver-xorg-video-nvidia' + sfx, [(p, '/usr/lib64/xorg/modules/drivers/nvidia_drv.so')])
        pkg('nvidia-utils' + sfx, [(p, '/usr/bin/nvidia-smi')])
        pkg('nvidia-persistenced', [(p, '/usr/bin/nvidia-persistenced'),
                                    (p + '-ubuntu', '/usr/lib/systemd/system/nvidia-persistenced.service')],
            scripts={'postinst': PERSISTENCED_USER})
        pkg('nvidia-compute-utils' + sfx, [], ['nvidia-persistenced'])
        common = ['nvidia-kernel-common' + sfx, 'libnvidia-compute' + sfx, 'nvidia-utils' + sfx,
                  'nvidia-compute-utils' + sfx, 'libnvidia-gl' + sfx, 'xserver-xorg-video-nvidia' + sfx]
        pkg('nvidia-driver{0}-open'.format(sfx), [], ['nvidia-dkms{0}-open'.format(sfx)] + common)
        pkg('nvidia-driver' + sfx, [], ['nvidia-dkms' + sfx] + common)
        pkg('nvidia-open', [], ['nvidia-driver{0}-open'.format(sfx)])
        pkg('cuda-drivers', [], ['nvidia-driver' + sfx])
        deb(cuda, work, 'nvidia-driver-pinning-' + branch, v,
            [(p, '/etc/apt/preferences.d/nvidia-driver-pinning-' + branch)], arch='all')
        fm, nscq, fm_extra, nscq_extra = apt_fm_names(version)
        xv = apt_extra_version(version)
        deb(cuda, work, fm, xv, [(p, '/usr/bin/nv-fabricmanager'),
                                 (p, '/usr/bin/nvidia-fabricmanager-start.sh'),
                                 (p, '/usr/lib/systemd/system/nvidia-fabricmanager.service'),
                                 (p, '/usr/share/nvidia/nvswitch/fabricmanager.cfg')], extra=fm_extra)
        deb(cuda, work, nscq, xv, [(p, '/usr/lib64/libnvidia-nscq.so.' + version)], extra=nscq_extra)
        deb(cuda, work, nvsdm_name(version), xv, [(p, '/usr/lib64/libnvsdm.so.' + version)])
        deb(cuda, work, 'nvidia-imex', xv, [(p, '/usr/bin/nvidia-imex'), (p, '/usr/bin/nvidia-imex-ctl'),
                                            (p, '/etc/nvidia-imex/config.cfg'),
                                            (p, '/usr/lib/systemd/system/nvidia-imex.service')])
    p = os.path.join(work, 'payload-nvlsm')
    deb(cuda, work, 'nvlsm', NVLSM_VERSION + '-1', [(p, '/opt/nvidia/nvlsm'),
                                                    (p, '/usr/share/nvidia/nvlsm/nvlsm.conf')])
    deb(cuda, work, 'infiniband-diags', IB_DIAGS_VERSION['apt'],
        [(os.path.join(work, 'payload-ib-apt'), '/usr/sbin/ibstat')])
    for dot, v in sorted(CUDA_TOOLKITS.items()):
        p = os.path.join(work, 'payload-cuda-' + dot)
        home = '/usr/local/cuda-' + dot
        dash = dot.replace('.', '-')
        deb(cuda, work, 'cuda-nvcc-' + dash, v['nvcc'] + '-1', [(p, home + '/bin/nvcc')])
        deb(cuda, work, 'cuda-cudart-dev-' + dash, v['cudart'] + '-1',
            [(p, home + '/include/cuda_runtime.h'), (p, home + '/include/cuda_runtime_api.h'),
             (p, home + '/lib64/libcudart.so')])
        deb(cuda, work, 'cuda-driver-dev-' + dash, v['driver'] + '-1',
            [(p, home + '/include/cuda.h'), (p, home + '/lib64/stubs/libcuda.so')])
        deb(cuda, work, 'cuda-nvml-dev-' + dash, v['nvml'] + '-1',
            [(p, home + '/include/nvml.h'), (p, home + '/lib64/stubs/libnvidia-ml.so')])
    for build in NCCL_CUDA_BUILDS:
        p = os.path.join(work, 'payload-nccl-apt-' + build)
        lib = '/usr/lib/x86_64-linux-gnu/'
        v = '{0}-1+cuda{1}'.format(NCCL_VERSION, build)
        deb(cuda, work, 'libnccl2', v, [(p, lib + 'libnccl.so.2'), (p, lib + 'libnccl.so.' + NCCL_VERSION)])
        deb(cuda, work, 'libnccl-dev', v, [(p, '/usr/include/nccl.h'), (p, lib + 'libnccl.so')],
            'libnccl2 (= {0})'.format(v))
    for version in DCGM_VERSIONS:
        p = os.path.join(work, 'payload-dcgm-' + version)
        full = '1:{0}-1'.format(version)
        # NVIDIA/DCGM cmake/packaging.cmake: CPACK_DEBIAN_CORE_PACKAGE_CONFLICTS "datacenter-gpu-manager".
        deb(cuda, work, 'datacenter-gpu-manager-4-core', full, [
            (p, '/usr/bin/dcgmi'), (p, '/usr/bin/nv-hostengine'), (p, '/usr/lib/systemd/system/nvidia-dcgm.service')],
            extra={'Conflicts': 'datacenter-gpu-manager'})
        for major in DCGM_CUDA_MAJORS:
            deb(cuda, work, 'datacenter-gpu-manager-4-cuda' + major, full,
                [(p, '/usr/libexec/datacenter-gpu-manager-4/plugins/cuda{0}/README'.format(major))],
                'datacenter-gpu-manager-4-core (= {0})'.format(full))


def build_apt_dcgm3(cuda, work):
    """DCGM 3.x as NVIDIA published it for apt (REALITY.md "DCGM 3.x"): datacenter-gpu-manager, version 1:<v> (v3.3.9
    cmake/packaging.cmake sets CPACK_DEBIAN_PACKAGE_EPOCH 1 and no Debian release), Provides/Conflicts/Replaces its
    own name."""
    p = os.path.join(work, 'payload-dcgm-' + DCGM3_VERSION)
    deb(cuda, work, 'datacenter-gpu-manager', '1:' + DCGM3_VERSION,
        [(p, '/usr/bin/dcgmi'), (p, '/usr/bin/nv-hostengine'), (p, '/usr/lib/systemd/system/nvidia-dcgm.service'),
         (p, '/usr/lib/systemd/system/dcgm.service')],
        extra={'Provides': 'datacenter-gpu-manager', 'Conflicts': 'datacenter-gpu-manager',
               'Replaces': 'datacenter-gpu-manager'})


def build_apt_ubuntu_signed(dist, work, kernels):
    """Ubuntu's Canonical-signed driver in the node's own archive (REALITY.md, "Ubuntu's signed driver", R25):
    nvidia-driver-<B>-server-open and its parts at <version>-0ubuntu0.24.04.N, the fabric manager and NSCQ with the
    branch in their names (nvidia-fabricmanager-<B> provides the virtual nvidia-fabricmanager), and per kernel
    linux-modules-nvidia-<B>-server-open-<kernel> with a prebuilt nvidia.ko marked signed by Canonical.  No DKMS."""
    for branch, (version, release) in sorted(UBUNTU_DRIVERS.items()):
        v = '{0}-{1}'.format(version, release)
        p = os.path.join(work, 'payload-' + version)
        sroot = os.path.join(work, 'ubuntu-signed-' + version)
        common = 'nvidia-kernel-common-{0}-server'.format(branch)
        eq = '(= {0})'.format(v)
        # Ubuntu's series and NVIDIA's repository ship the same files: each of Ubuntu's packages conflicts with its
        # NVIDIA counterpart (a guess at the mechanism; REALITY.md), so apt swaps them when told to install the other.
        deb(dist, work, common, v, [(p, '/usr/lib/testbed/nvidia-kmod-common-' + version)],
            extra={'Provides': '{0}-{1}'.format(common, version),
                   'Conflicts': 'nvidia-kernel-common-{0}'.format(branch)})
        deb(dist, work, 'libnvidia-compute-{0}-server'.format(branch), v, [(p, '/usr/lib64/libcuda.so.' + version)],
            '{0} {1}'.format(common, eq), extra={'Conflicts': 'libnvidia-compute-{0}'.format(branch)})
        deb(dist, work, 'nvidia-utils-{0}-server'.format(branch), v, [(p, '/usr/bin/nvidia-smi')],
            '{0} {1}'.format(common, eq), extra={'Conflicts': 'nvidia-utils-{0}'.format(branch)})
        deb(dist, work, 'nvidia-compute-utils-{0}-server'.format(branch), v,
            [(p, '/usr/bin/nvidia-persistenced'),
             (p + '-ubuntu', '/usr/lib/systemd/system/nvidia-persistenced.service')],
            '{0} {1}'.format(common, eq), extra={'Conflicts': 'nvidia-persistenced'},
            scripts={'postinst': PERSISTENCED_USER})
        # Ubuntu's own DKMS package of the series (source nvidia-graphics-drivers-<B>-server): registers DKMS module
        # nvidia from /usr/src/nvidia-<V>, as NVIDIA's nvidia-dkms-<B>-open does (the same path: they conflict).
        deb(dist, work, 'nvidia-dkms-{0}-server-open'.format(branch), v,
            [(p + '-ubuntu-open', '/usr/src/nvidia-' + version)], '{0} {1}'.format(common, eq),
            extra={'Pre-Depends': 'dkms', 'Conflicts': 'nvidia-dkms-{0}-open, nvidia-dkms-{0}'.format(branch)},
            scripts=dkms_scripts('nvidia', version))
        headless = [common, 'libnvidia-compute-{0}-server'.format(branch),
                    'nvidia-compute-utils-{0}-server'.format(branch)]
        # The driver meta package pulls the DKMS package (NVIDIA/gpu-driver-container commit 8a29f61 had to purge
        # nvidia-dkms-<B>-server after installing nvidia-driver-<B>-server); the headless no-DKMS meta does not.
        parts = headless + ['nvidia-utils-{0}-server'.format(branch), 'nvidia-dkms-{0}-server-open'.format(branch)]
        deb(dist, work, 'nvidia-driver-{0}-server-open'.format(branch), v, [],
            ', '.join('{0} {1}'.format(d, eq) for d in parts),
            extra={'Conflicts': 'nvidia-driver-{0}-open, nvidia-open'.format(branch)})
        deb(dist, work, 'nvidia-headless-no-dkms-{0}-server-open'.format(branch), v, [],
            ', '.join('{0} {1}'.format(d, eq) for d in headless),
            extra={'Conflicts': 'nvidia-driver-{0}-open, nvidia-open'.format(branch)})
        fm_v = '{0}-{1}'.format(version, UBUNTU_FM_RELEASE)
        deb(dist, work, 'nvidia-fabricmanager-' + branch, fm_v,
            [(p, '/usr/bin/nv-fabricmanager'), (p, '/usr/bin/nvidia-fabricmanager-start.sh'),
             (p, '/usr/lib/systemd/system/nvidia-fabricmanager.service'),
             (p, '/usr/share/nvidia/nvswitch/fabricmanager.cfg')],
            '{0}-{1}'.format(common, version), extra={'Provides': 'nvidia-fabricmanager',
                                                      'Conflicts': 'nvidia-fabricmanager'})
        deb(dist, work, 'libnvidia-nscq-' + branch, fm_v, [(p, '/usr/lib64/libnvidia-nscq.so.' + version)],
            '{0}-{1}'.format(common, version), extra={'Conflicts': 'libnvidia-nscq'})
        for k in kernels:
            rel = '/lib/modules/{0}/kernel/nvidia-{1}srv-open/nvidia.ko'.format(k, branch)
            put(sroot, rel, 'TESTBED-NVIDIA-MODULE version={0} flavour=open signer=canonical\n'.format(version))
            kver = k.split('-')[0]
            deb(dist, work, 'linux-modules-nvidia-{0}-server-open-{1}'.format(branch, k), kver + '-1+1',
                [(sroot, rel)], 'linux-image-{0}, {1} (>= {2})'.format(k, common, version))
        # The flavour's meta package follows linux-image-generic's kernel ABI; here it still names the first
        # kernel's modules: linux-restricted-modules has not published any for the newer kernel (the gap a kernel
        # update outside the collection falls into).
        kver = kernels[0].split('-')[0]
        deb(dist, work, 'linux-modules-nvidia-{0}-server-open-generic'.format(branch), kver + '-1+1', [],
            'linux-modules-nvidia-{0}-server-open-{1}, {2} (>= {3})'.format(branch, kernels[0], common, version))


def build_apt(out, work, kernel):
    dist = os.path.join(out, 'apt', 'debian')
    cuda = os.path.join(out, 'apt', 'cuda')
    os.makedirs(dist)
    os.makedirs(cuda)
    kroot = os.path.join(work, 'apt-kernels')
    gdbin = '[ -x /usr/lib/gpu-double/bin/gpu-double ] && /usr/lib/gpu-double/bin/gpu-double '
    newer = ubuntu_newer_kernel(kernel)
    for k in (kernel, DEB_OTHER_KERNEL, newer):
        kernel_tree(kroot, k, 'linux-headers-' + k)
        kver = k.split('-')[0]
        deb(dist, work, 'linux-image-' + k, kver + '-1',
            [(kroot, '/boot/vmlinuz-' + k), (kroot, '/boot/config-' + k),
             (kroot, '/lib/modules/{0}/modules.dep'.format(k)), (kroot, '/lib/modules/{0}/kernel'.format(k))],
            extra={'Provides': 'linux-image'},
            scripts={'postinst': gdbin + 'testbed-kernel-install add {0} || true'.format(k),
                     'postrm': '[ "$1" = remove ] || [ "$1" = purge ] || exit 0\n' + gdbin +
                               'testbed-kernel-install remove {0} || true'.format(k)})
        deb(dist, work, 'linux-headers-' + k, kver + '-1',
            [(kroot, '/usr/src/linux-headers-' + k), (kroot, '/lib/modules/{0}/build'.format(k))],
            extra={'Provides': 'linux-headers'},
            scripts={'postinst': '[ -x /usr/sbin/dkms ] && /usr/sbin/dkms autoinstall -k {0} || true'.format(k)})
    droot = os.path.join(work, 'apt-dkms')
    put(droot, '/usr/share/doc/testbed/dkms', 'dkms shim of the simulated fleet\n')
    os.makedirs(os.path.join(droot, 'usr/sbin'))
    os.symlink('/usr/lib/gpu-double/bin/gpu-double', os.path.join(droot, 'usr/sbin/dkms'))
    deb(dist, work, 'dkms', DEB_DKMS_VERSION, [(droot, '/usr/share/doc/testbed/dkms'), (droot, '/usr/sbin/dkms')],
        arch='all')
    # Ubuntu's kernel image meta package of the generic flavour, at the newest kernel (which has no signed NVIDIA
    # modules): installing or upgrading it is how a kernel update reaches a node outside the collection.
    deb(dist, work, 'linux-image-generic', newer.rsplit('-', 1)[0].replace('-', '.'), [], 'linux-image-' + newer)
    build_apt_ubuntu_signed(dist, work, (kernel, DEB_OTHER_KERNEL))
    # Ubuntu's build tools (REALITY.md "Performance tools"): make, g++ (g++ and c++), cmake, Boost program_options
    # (libboost-program-options-dev holds the header, the .so and the .a).
    p = os.path.join(work, 'payload-devtools-apt')
    lib = '/usr/lib/x86_64-linux-gnu/'
    deb(dist, work, 'make', APT_DEVTOOLS['make'], [(p, '/usr/bin/make')])
    deb(dist, work, 'g++', APT_DEVTOOLS['g++'], [(p, '/usr/bin/g++'), (p, '/usr/bin/c++')])
    deb(dist, work, 'cmake', APT_DEVTOOLS['cmake'], [(p, '/usr/bin/cmake')])
    deb(dist, work, 'libboost-program-options-dev', APT_DEVTOOLS['libboost-program-options-dev'],
        [(p, '/usr/include/boost/program_options.hpp'), (p, '/usr/include/boost/version.hpp'),
         (p, lib + 'libboost_program_options.so'), (p, lib + 'libboost_program_options.a')])
    build_apt_cuda(cuda, work)
    build_apt_dcgm3(cuda, work)
    for d in (dist, cuda):
        text = run(['dpkg-scanpackages', '--multiversion', '.', '/dev/null'], cwd=d)
        with open(os.path.join(d, 'Packages'), 'w') as f:
            f.write(text)
        with gzip.open(os.path.join(d, 'Packages.gz'), 'wb') as f:
            f.write(text.encode('utf-8'))
    return cuda


def write_release(d, keys, key):
    """Release (MD5Sum/SHA256 of the index files), InRelease and Release.gpg, as apt's flat repositories have."""
    lines = ['Origin: gpufleet testbed', 'Label: simulated NVIDIA CUDA repository', 'Architectures: amd64 all',
             'Date: ' + time.strftime('%a, %d %b %Y %H:%M:%S UTC', time.gmtime())]
    for field, algo in (('MD5Sum', hashlib.md5), ('SHA256', hashlib.sha256)):
        lines.append(field + ':')
        for name in ('Packages', 'Packages.gz'):
            with open(os.path.join(d, name), 'rb') as f:
                data = f.read()
            lines.append(' {0} {1} {2}'.format(algo(data).hexdigest(), len(data), name))
    path = os.path.join(d, 'Release')
    with open(path, 'w') as f:
        f.write('\n'.join(lines) + '\n')
    keys.clearsign(key, path, os.path.join(d, 'InRelease'))
    keys.detach_sign(key, path, '.gpg')


# ------------------------------------------------------------------ main

def build(out, force=False, keys_dir=None):
    kernel = os.uname()[2]
    missing = [t for t in TOOLS if shutil.which(t) is None]
    if missing:
        raise BuildError('missing tools: {0} (Debian: apt-get install rpm createrepo-c dpkg-dev gnupg)'.format(
            ', '.join(missing)))
    parent = os.path.dirname(os.path.abspath(out))
    if not os.path.isdir(parent):
        os.makedirs(parent)
    keys = Keys(keys_dir or os.path.join(parent, 'repo-keys'))
    try:
        keys.ensure()
        digest = inputs_hash(kernel, keys.fingerprints())
        stamp = os.path.join(out, '.inputs-sha256')
        if not force and os.path.exists(stamp):
            with open(stamp) as f:
                if f.read().strip() == digest:
                    print('build.py: {0} is up to date (inputs {1})'.format(out, digest[:12]))
                    return 0
        tmp_out = tempfile.mkdtemp(prefix='.repos-', dir=parent)
        os.chmod(tmp_out, 0o755)
        work = tempfile.mkdtemp(prefix='.repos-work-', dir=parent)
        try:
            for version in DRIVERS.values():
                driver_payload(os.path.join(work, 'payload-' + version), version)
            nvlsm_payload(os.path.join(work, 'payload-nvlsm'))
            for version in DCGM_VERSIONS:
                dcgm_payload(os.path.join(work, 'payload-dcgm-' + version), version)
            dcgm3_payload(os.path.join(work, 'payload-dcgm-' + DCGM3_VERSION), DCGM3_VERSION)
            for fam, ib_version in sorted(IB_DIAGS_VERSION.items()):
                ib_payload(os.path.join(work, 'payload-ib-' + fam), ib_version)
            for dot in CUDA_TOOLKITS:
                cuda_payload(os.path.join(work, 'payload-cuda-' + dot), dot)
            for cuda in NCCL_CUDA_BUILDS:
                nccl_payload(os.path.join(work, 'payload-nccl-el-' + cuda), '/usr/lib64', cuda)
                nccl_payload(os.path.join(work, 'payload-nccl-apt-' + cuda), '/usr/lib/x86_64-linux-gnu', cuda)
            for el, tools in sorted(EL_DEVTOOLS.items()):
                devtools_payload(os.path.join(work, 'payload-devtools-' + el), '/usr/lib64', {
                    'gxx': tools['gxx'][0], 'cmake': tools['cmake'][0], 'boost': tools['boost'][0]})
            devtools_payload(os.path.join(work, 'payload-devtools-apt'), '/usr/lib/x86_64-linux-gnu', {
                'gxx': APT_DEVTOOLS['g++'].rsplit(':', 1)[-1].split('-', 1)[0],
                'cmake': APT_DEVTOOLS['cmake'].split('-', 1)[0], 'boost': APT_BOOST_VERSION})
            source_tarballs(tmp_out)
            jobs = []
            el_dirs = {}
            for el in sorted(ELREPO):
                el_dirs[el] = build_el(el, tmp_out, work, kernel, jobs)
            with concurrent.futures.ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
                futs = [pool.submit(rpmbuild, spec, d, work, defs) for spec, d, defs in jobs]
                apt_fut = pool.submit(build_apt, tmp_out, work, kernel)
                for fut in futs:
                    fut.result()
                for el, dirs in sorted(el_dirs.items()):
                    finish_el(el, dirs, work, keys)
                cuda = apt_fut.result()
            write_release(cuda, keys, APT_KEY[0])
            keys.export(APT_KEY[0], os.path.join(cuda, APT_KEY[1]))
            with open(os.path.join(tmp_out, '.inputs-sha256'), 'w') as f:
                f.write(digest + '\n')
            with open(os.path.join(tmp_out, 'README'), 'w') as f:
                f.write('Built by tests/testbed/repos/build.py for kernel {0}; do not edit.\n'.format(kernel))
            if os.path.exists(out):
                shutil.rmtree(out)
            os.rename(tmp_out, out)
        finally:
            shutil.rmtree(work, ignore_errors=True)
            if os.path.exists(tmp_out):
                shutil.rmtree(tmp_out, ignore_errors=True)
    finally:
        keys.close()
    print('build.py: built {0} (kernel {1}, inputs {2})'.format(out, kernel, digest[:12]))
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n', maxsplit=1)[0])
    ap.add_argument('--out', default='.testbed/repos', help='output folder (default .testbed/repos)')
    ap.add_argument('--force', action='store_true', help='rebuild even when the inputs are unchanged')
    ap.add_argument('--keys', default=None,
                    help='GnuPG home of the throwaway signing keys (default: repo-keys next to --out)')
    args = ap.parse_args(argv)
    try:
        return build(args.out, args.force, args.keys)
    except BuildError as exc:
        sys.stderr.write('build.py: {0}\n'.format(exc))
        return 1


if __name__ == '__main__':
    sys.exit(main())

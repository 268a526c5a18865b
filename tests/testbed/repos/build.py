# -*- coding: utf-8 -*-
# Copyright (c) 2025 gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Build the simulated fleet's package repositories.

    python3 tests/testbed/repos/build.py --out .testbed/repos [--force]

Produces .testbed/repos/el8|el9|el10/{baseos,elrepo,cuda}/ (createrepo_c; nvidia-driver module
streams on el8/el9) and .testbed/repos/apt/{debian,cuda}/ (flat apt repositories), from the spec and
control files in tests/testbed/packages/ and the GPU double's nvidia-smi.  The inputs (those files,
this script and `uname -r`) are hashed; when the hash matches the last build nothing is done.
Needs rpmbuild, createrepo_c, modifyrepo_c, dpkg-deb and dpkg-scanpackages.
"""
from __future__ import absolute_import, division, print_function

import argparse
import concurrent.futures
import gzip
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
TESTBED = os.path.dirname(HERE)
PKGS = os.path.join(TESTBED, 'packages')
PAYLOAD = os.path.join(PKGS, 'payload')
DOUBLE = os.path.join(TESTBED, 'gpu_double')

DRIVERS = {'570': '570.172.08', '580': '580.95.05', '590': '590.48.01'}
NVLSM_VERSION = '2025.06.4'
# ELRepo kernels: el8 and el9 have kernel-lt and kernel-ml, el10 kernel-ml only
ELREPO = {
    'el8': {'kernel-lt': '5.15.190', 'kernel-ml': '6.16.7'},
    'el9': {'kernel-lt': '6.1.150', 'kernel-ml': '6.16.7'},
    'el10': {'kernel-ml': '6.16.7'},
}
MODULAR = ('el8', 'el9')
DEB_OTHER_KERNEL = '6.1.0-40-amd64'
TOOLS = ('rpmbuild', 'createrepo_c', 'modifyrepo_c', 'dpkg-deb', 'dpkg-scanpackages')


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


def inputs_hash(kernel):
    h = hashlib.sha256()
    h.update(kernel.encode())
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


def driver_payload(root, version):
    """All files of one driver version (packages pick theirs through %files / the deb lists)."""
    branch = version.split('.')[0]
    with open(os.path.join(DOUBLE, 'bin', 'nvidia-smi.in')) as f:
        put(root, '/usr/bin/nvidia-smi', '#!/usr/bin/python3 -sS\n' + f.read().replace('@VERSION@', version), 0o755)
    put(root, '/usr/share/doc/testbed/nvidia-driver-' + version, 'NVIDIA driver {0} (simulated)\n'.format(version))
    put(root, '/usr/lib/testbed/nvidia-kmod-common-' + version, 'nvidia-kmod-common {0}\n'.format(version))
    put(root, '/usr/src/nvidia-open-{0}/dkms.conf'.format(version),
        fill('dkms.conf.in', VERSION=version, FLAVOUR='open').replace('"nvidia"\n', '"nvidia-open"\n', 1))
    put(root, '/usr/src/nvidia-{0}/dkms.conf'.format(version), fill('dkms.conf.in', VERSION=version,
                                                                    FLAVOUR='proprietary'))
    for exe, daemon in (('nvidia-persistenced', 'persistenced'), ('nv-fabricmanager', 'fabricmanager')):
        put(root, '/usr/bin/' + exe, fill('daemon.in', NAME=exe, DAEMON=daemon, VERSION=version), 0o755)
    put(root, '/usr/bin/nvidia-imex', fill('nvidia-imex.in', VERSION=version), 0o755)
    put(root, '/usr/share/nvidia/nvswitch/fabricmanager.cfg', fill('fabricmanager.cfg.in', VERSION=version))
    for unit in ('nvidia-persistenced', 'nvidia-fabricmanager', 'nvidia-imex'):
        put(root, '/usr/lib/systemd/system/{0}.service'.format(unit), fill('units/{0}.service'.format(unit)))
    put(root, '/etc/apt/preferences.d/nvidia-driver-pinning-' + branch, fill('pinning.in', BRANCH=branch))


def nvlsm_payload(root):
    put(root, '/usr/bin/nvlsm', fill('daemon.in', NAME='nvlsm', DAEMON='nvlsm', VERSION=NVLSM_VERSION), 0o755)
    put(root, '/usr/lib/systemd/system/nvlsm.service', fill('units/nvlsm.service'))


# ------------------------------------------------------------------ RPM

def rpmbuild(spec, outdir, work, defines):
    top = tempfile.mkdtemp(prefix='rpm-', dir=work)
    argv = ['rpmbuild', '-bb', '--quiet', '--define', '_topdir ' + top, '--define', '_rpmdir ' + outdir,
            '--define', '_build_name_fmt %%{NAME}-%%{VERSION}-%%{RELEASE}.%%{ARCH}.rpm',
            '--define', '_build_id_links none', '--define', '_source_payload w1.gzdio',
            '--define', '_binary_payload w1.gzdio', '--define', '__os_install_post %{nil}',
            '--define', 'debug_package %{nil}', '--target', 'x86_64']
    for k, v in defines:
        argv += ['--define', '{0} {1}'.format(k, v)]
    run(argv + [os.path.join(PKGS, 'rpm', spec)])
    shutil.rmtree(top, ignore_errors=True)


def modules_yaml(el, rpms):
    """nvidia-driver module streams like NVIDIA's el8/el9 repos: <branch>-open, <branch>-dkms,
    open-dkms and latest-dkms (default)."""
    def nevras(version, flavour):
        names = ['nvidia-driver', 'nvidia-driver-cuda', 'nvidia-kmod-common', 'nvidia-persistenced',
                 'nvidia-fabric-manager', 'nvidia-imex']
        names += ['nvidia-open', 'kmod-nvidia-open-dkms'] if flavour == 'open' else \
            ['cuda-drivers', 'kmod-nvidia-latest-dkms']
        return ['{0}-0:{1}-1.{2}.x86_64'.format(n, version, el) for n in names]

    docs = []
    latest = DRIVERS[max(DRIVERS)]
    streams = []
    for branch, version in sorted(DRIVERS.items()):
        streams.append(('{0}-open'.format(branch), version, 'open'))
        streams.append(('{0}-dkms'.format(branch), version, 'dkms'))
    streams.append(('open-dkms', latest, 'open'))
    streams.append(('latest-dkms', latest, 'dkms'))
    for n, (stream, version, flavour) in enumerate(streams):
        arts = nevras(version, flavour)
        meta = 'nvidia-open' if flavour == 'open' else 'cuda-drivers'
        docs.append('\n'.join([
            '---', 'document: modulemd', 'version: 2', 'data:', '  name: nvidia-driver',
            '  stream: "{0}"'.format(stream), '  version: {0}'.format(20250101000000 + n),
            '  context: "testbed"', '  arch: x86_64',
            '  summary: Nvidia driver for {0} branch (simulated fleet)'.format(stream),
            '  description: >-', '    NVIDIA driver packages of the simulated fleet.',
            '  license:', '    module:', '    - MIT',
            '  profiles:', '    default:', '      rpms:', '      - {0}'.format(meta),
            '    fm:', '      rpms:', '      - {0}'.format(meta), '      - nvidia-fabric-manager',
            '  artifacts:', '    rpms:'] + ['    - {0}'.format(a) for a in arts] + ['...']))
    docs.append('\n'.join(['---', 'document: modulemd-defaults', 'version: 1', 'data:',
                           '  module: nvidia-driver', '  stream: latest-dkms', '  profiles:',
                           '    latest-dkms: [default]', '...']))
    return '\n'.join(docs) + '\n'


def build_el(el, out, work, kernel, jobs):
    ver, rel = split_uname(kernel)
    dirs = dict((r, os.path.join(out, el, r)) for r in ('baseos', 'elrepo', 'cuda'))
    for d in dirs.values():
        os.makedirs(d)
    dist = ('dist', '.' + el)
    jobs.append(('testbed-base.spec', dirs['baseos'], [dist]))
    jobs.append(('kernel.spec', dirs['baseos'], [('kname', 'kernel'), ('kversion', ver),
                                                 ('krelease', rel), ('kuname', kernel),
                                                 ('kuname_evr', uname_evr(kernel))]))
    for kname, kver in sorted(ELREPO[el].items()):
        krel = '1.{0}.elrepo'.format(el)
        jobs.append(('kernel.spec', dirs['elrepo'], [('kname', kname), ('kversion', kver), ('krelease', krel),
                                                     ('kuname', '{0}-{1}.x86_64'.format(kver, krel)),
                                                     ('kuname_evr', '{0}-{1}.x86_64'.format(kver, krel))]))
    for branch, version in sorted(DRIVERS.items()):
        jobs.append(('nvidia-driver.spec', dirs['cuda'], [dist, ('drv_version', version), ('branch', branch),
                                                          ('payload', os.path.join(work, 'payload-' + version))]))
    jobs.append(('nvlsm.spec', dirs['cuda'], [dist, ('nvlsm_version', NVLSM_VERSION),
                                              ('payload', os.path.join(work, 'payload-nvlsm'))]))
    return dirs


def finish_el(el, dirs, work):
    for name, d in dirs.items():
        run(['createrepo_c', '--quiet', '--no-database', d])
        if name == 'cuda' and el in MODULAR:
            path = os.path.join(work, 'modules-{0}.yaml'.format(el))
            with open(path, 'w') as f:
                f.write(modules_yaml(el, None))
            run(['modifyrepo_c', '--mdtype=modules', path, os.path.join(d, 'repodata')])


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


def build_apt(out, work, kernel):
    dist = os.path.join(out, 'apt', 'debian')
    cuda = os.path.join(out, 'apt', 'cuda')
    os.makedirs(dist)
    os.makedirs(cuda)
    kroot = os.path.join(work, 'apt-kernels')
    gdbin = '[ -x /usr/lib/gpu-double/bin/gpu-double ] && /usr/lib/gpu-double/bin/gpu-double '
    for k in (kernel, DEB_OTHER_KERNEL):
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
    deb(dist, work, 'dkms', '1:3.0.10-testbed1', [(droot, '/usr/share/doc/testbed/dkms'), (droot, '/usr/sbin/dkms')],
        arch='all')
    for branch, version in sorted(DRIVERS.items()):
        v = version + '-1'
        p = os.path.join(work, 'payload-' + version)
        eq = '(= {0})'.format(v)

        def dk(mod):
            return {'postinst': 'for b in /lib/modules/*/build; do k=${{b#/lib/modules/}}; k=${{k%/build}}; '
                                '/usr/sbin/dkms install -m {0} -v {1} -k "$k" || true; done'.format(mod, version),
                    'prerm': '/usr/sbin/dkms remove -m {0} -v {1} --all || true'.format(mod, version)}
        deb(cuda, work, 'nvidia-kernel-common', v, [(p, '/usr/lib/testbed/nvidia-kmod-common-' + version)])
        deb(cuda, work, 'nvidia-smi', v, [(p, '/usr/bin/nvidia-smi')], 'nvidia-kernel-common ' + eq)
        deb(cuda, work, 'nvidia-driver', v, [(p, '/usr/share/doc/testbed/nvidia-driver-' + version)],
            'nvidia-smi {0}, nvidia-kernel-common {0}'.format(eq))
        deb(cuda, work, 'nvidia-kernel-open-dkms', v, [(p, '/usr/src/nvidia-open-' + version)],
            'dkms, nvidia-kernel-common ' + eq, {'Conflicts': 'nvidia-kernel-dkms'}, dk('nvidia-open'))
        deb(cuda, work, 'nvidia-kernel-dkms', v, [(p, '/usr/src/nvidia-' + version)],
            'dkms, nvidia-kernel-common ' + eq, {'Conflicts': 'nvidia-kernel-open-dkms'}, dk('nvidia'))
        deb(cuda, work, 'nvidia-open', v, [], 'nvidia-driver {0}, nvidia-kernel-open-dkms {0}'.format(eq))
        deb(cuda, work, 'cuda-drivers', v, [], 'nvidia-driver {0}, nvidia-kernel-dkms {0}'.format(eq))
        deb(cuda, work, 'nvidia-persistenced', v, [(p, '/usr/bin/nvidia-persistenced'),
                                                   (p, '/usr/lib/systemd/system/nvidia-persistenced.service')],
            'nvidia-driver ' + eq)
        deb(cuda, work, 'nvidia-fabricmanager', v, [(p, '/usr/bin/nv-fabricmanager'),
                                                    (p, '/usr/lib/systemd/system/nvidia-fabricmanager.service'),
                                                    (p, '/usr/share/nvidia/nvswitch/fabricmanager.cfg')])
        deb(cuda, work, 'nvidia-imex', v, [(p, '/usr/bin/nvidia-imex'),
                                           (p, '/usr/lib/systemd/system/nvidia-imex.service')])
        deb(cuda, work, 'nvidia-driver-pinning-' + branch, v,
            [(p, '/etc/apt/preferences.d/nvidia-driver-pinning-' + branch)], arch='all')
    p = os.path.join(work, 'payload-nvlsm')
    deb(cuda, work, 'nvlsm', NVLSM_VERSION + '-1', [(p, '/usr/bin/nvlsm'), (p, '/usr/lib/systemd/system/nvlsm.service')])
    for d in (dist, cuda):
        text = run(['dpkg-scanpackages', '--multiversion', '.', '/dev/null'], cwd=d)
        with open(os.path.join(d, 'Packages'), 'w') as f:
            f.write(text)
        with gzip.open(os.path.join(d, 'Packages.gz'), 'wb') as f:
            f.write(text.encode('utf-8'))


# ------------------------------------------------------------------ main

def build(out, force=False):
    kernel = os.uname()[2]
    digest = inputs_hash(kernel)
    stamp = os.path.join(out, '.inputs-sha256')
    if not force and os.path.exists(stamp):
        with open(stamp) as f:
            if f.read().strip() == digest:
                print('build.py: {0} is up to date (inputs {1})'.format(out, digest[:12]))
                return 0
    missing = [t for t in TOOLS if shutil.which(t) is None]
    if missing:
        raise BuildError('missing tools: {0} (Debian: apt-get install rpm createrepo-c dpkg-dev)'.format(
            ', '.join(missing)))
    parent = os.path.dirname(os.path.abspath(out))
    if not os.path.isdir(parent):
        os.makedirs(parent)
    tmp_out = tempfile.mkdtemp(prefix='.repos-', dir=parent)
    os.chmod(tmp_out, 0o755)
    work = tempfile.mkdtemp(prefix='.repos-work-', dir=parent)
    try:
        for version in DRIVERS.values():
            driver_payload(os.path.join(work, 'payload-' + version), version)
        nvlsm_payload(os.path.join(work, 'payload-nvlsm'))
        jobs = []
        el_dirs = {}
        for el in sorted(ELREPO):
            el_dirs[el] = build_el(el, tmp_out, work, kernel, jobs)
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2)) as pool:
            futs = [pool.submit(rpmbuild, spec, d, work, defs) for spec, d, defs in jobs]
            futs.append(pool.submit(build_apt, tmp_out, work, kernel))
            for fut in futs:
                fut.result()
        for el, dirs in sorted(el_dirs.items()):
            finish_el(el, dirs, work)
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
    print('build.py: built {0} (kernel {1}, inputs {2})'.format(out, kernel, digest[:12]))
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n', maxsplit=1)[0])
    ap.add_argument('--out', default='.testbed/repos', help='output folder (default .testbed/repos)')
    ap.add_argument('--force', action='store_true', help='rebuild even when the inputs are unchanged')
    args = ap.parse_args(argv)
    try:
        return build(args.out, args.force)
    except BuildError as exc:
        sys.stderr.write('build.py: {0}\n'.format(exc))
        return 1


if __name__ == '__main__':
    sys.exit(main())

# -*- coding: utf-8 -*-
# Copyright (c) 2025 gpufleet maintainers
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The simulated fleet's repositories copy the real ones (tests/testbed/REALITY.md: R1, R3, R4, R5, R6, R7, R8, R12).

The build-based tests build every repository once (tests/testbed/repos/build.py, throwaway keys in a temporary
folder) and look at the result with rpm, dnf, dpkg-deb, gpg and gpgv, as a node would.
"""
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import glob
import hashlib
import os
import re
import shutil
import subprocess
import sys
import time

import pytest

from ansible_collections.gpufleet.nodeprep.tests.unit.nodeprep_harness import ROOT

TESTBED = os.path.join(ROOT, 'tests', 'testbed')
PKGS = os.path.join(TESTBED, 'packages')
sys.path.insert(0, os.path.join(TESTBED, 'repos'))
sys.path.insert(0, TESTBED)

import build  # noqa: E402
import testbed  # noqa: E402

ENV = dict(os.environ, LC_ALL='C', LANGUAGE='C')


def sh(argv, cwd=None, check=True):
    proc = subprocess.run(argv, cwd=cwd, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, check=False)
    if check and proc.returncode != 0:
        msg = '{0} failed ({1}):\n{2}{3}'.format(' '.join(argv), proc.returncode, proc.stdout, proc.stderr)
        raise AssertionError(msg)
    return proc


def read(*parts):
    with open(os.path.join(*parts)) as f:
        return f.read()


# ------------------------------------------------------------------ names and units (no build needed)

@pytest.mark.parametrize('version, el, names', [
    ('570.172.08', 'el9', ('nvidia-fabric-manager', 'libnvidia-nscq-570', '1')),
    ('580.95.05', 'el9', ('nvidia-fabricmanager', 'libnvidia-nscq', '1')),
    ('590.48.01', 'el9', ('nvidia-fabricmanager', 'libnvidia-nscq', '1.el9')),
    ('590.48.01', 'el10', ('nvidia-fabricmanager', 'libnvidia-nscq', '1.el10')),
])
def test_el_fabric_manager_named_by_branch(version, el, names):
    assert build.el_fm_names(version, el) == names


@pytest.mark.parametrize('version, fm, nscq, provides', [
    ('570.172.08', 'nvidia-fabricmanager-570', 'libnvidia-nscq-570', None),
    ('580.95.05', 'nvidia-fabricmanager', 'libnvidia-nscq', 'nvidia-fabricmanager-580'),
    ('590.48.01', 'nvidia-fabricmanager', 'libnvidia-nscq', 'nvidia-fabricmanager-590'),
])
def test_apt_fabric_manager_named_by_branch(version, fm, nscq, provides):
    got = build.apt_fm_names(version)
    assert got[:2] == (fm, nscq)
    assert got[2].get('Provides') == provides


def test_branches_below_and_from_580_exist():
    assert any(int(b) < 580 for b in build.DRIVERS) and any(int(b) >= 580 for b in build.DRIVERS)


def test_nvlsm_ships_no_unit():
    assert not os.path.exists(os.path.join(PKGS, 'payload', 'units', 'nvlsm.service'))
    spec = read(PKGS, 'rpm', 'nvlsm.spec')
    files = spec.split('%files', 1)[1]
    assert '/opt/nvidia/nvlsm' in files and '.service' not in files


def test_ubuntu_persistenced_unit_is_the_stock_one():
    unit = read(PKGS, 'payload', 'units', 'nvidia-persistenced-ubuntu.service')
    assert ('ExecStart=/usr/bin/nvidia-persistenced --user nvidia-persistenced --no-persistence-mode --verbose'
            in unit.splitlines())
    assert 'StopWhenUnneeded=true' in unit.splitlines()
    assert '[Install]' not in unit


def test_fabric_manager_unit_uses_the_start_script():
    unit = read(PKGS, 'payload', 'units', 'nvidia-fabricmanager.service').splitlines()
    assert 'ExecStart=/usr/bin/nvidia-fabricmanager-start.sh --mode start' in unit
    assert 'ExecStartPre=/usr/bin/nvidia-fabricmanager-start.sh --mode precheck' in unit
    assert not any('nvlsm' in line for line in unit)


def test_every_key_has_its_own_file_name():
    files = {}
    for repo, fn in build.EL_KEY_FILES.items():
        for el in ('el8', 'el9', 'el10'):
            for key, filename in fn(el):
                files.setdefault(filename, set()).add(key)
    files.setdefault(build.APT_KEY[1], set()).add(build.APT_KEY[0])
    assert files['D42D0685.pub'] == {'cuda-rhel'}
    assert files['CDF6BA43.pub'] == {'cuda-rhel10'}
    assert files['3bf863cc.pub'] == {'cuda-apt'}
    assert files['RPM-GPG-KEY-v2-elrepo.org'] == {'elrepo-v2'}
    assert {files['RPM-GPG-KEY-EPEL-{0}'.format(n)].pop() for n in (8, 9, 10)} == {'epel-8', 'epel-9', 'epel-10'}


@pytest.mark.parametrize('major', [8, 9, 10])
def test_node_repository_definitions_check_signatures(major):
    text = read(TESTBED, 'base', 'os', 'rocky{0}'.format(major), 'etc', 'yum.repos.d', 'testbed-baseos.repo')
    sections = re.split(r'(?m)^\[', text)[1:]
    assert len(sections) == 2
    for sec in sections:
        assert re.search(r'(?m)^gpgcheck=1$', sec), sec
        assert 'gpgkey=file:///srv/testbed-repos/el{0}/baseos/RPM-GPG-KEY-Rocky-{0}'.format(major) in sec
    crb = 'powertools' if major == 8 else 'crb'
    assert re.search(r'(?m)^\[{0}\]\n(.*\n)*enabled=0$'.format(crb), text)


def test_inventory_keeps_gpgcheck_on_and_names_the_new_urls(tmp_path, monkeypatch):
    monkeypatch.setattr(testbed, 'STATE_DIR', str(tmp_path))
    nodes = testbed.plan_fleet(4)
    testbed.write_inventory(nodes, '/k')
    text = (tmp_path / 'inventory.yml').read_text()
    assert 'gpgcheck' not in text
    assert 'nodeprep_nvidia_driver_epel_url: "file:///srv/testbed-repos/el9/epel/"' in text
    assert 'nodeprep_nvidia_driver_epel_gpgkey: "file:///srv/testbed-repos/el10/epel/RPM-GPG-KEY-EPEL-10"' in text
    branches = dict((n['name'], n['branch']) for n in nodes)
    assert branches['el8-h100-01'] == '570' and set(branches.values()) == {'570', '580'}
    assert re.search(r'el8-h100-01:\n(\s+\w+: .*\n)*\s+nodeprep_nvidia_driver_branch: "570"', text)


def test_nodes_get_net_admin_but_never_host_wide_capabilities():
    node = testbed.plan_fleet(1)[0]
    node['netns'] = 'x'
    caps = [a for a in testbed.nspawn_argv(node) if a.startswith('--capability=')]
    assert len(caps) == 1
    given = caps[0].split('=', 1)[1].split(',')
    assert 'CAP_NET_ADMIN' in given
    assert not set(given) & {'CAP_SYS_MODULE', 'CAP_SYS_TIME', 'all'}


# ------------------------------------------------------------------ the built repositories

TOOLS = build.TOOLS + ('dnf', 'gpgv', 'dpkg-deb')


@pytest.fixture(scope='module')
def repos(tmp_path_factory):
    missing = [t for t in TOOLS if shutil.which(t) is None]
    if missing:
        pytest.skip('needs ' + ', '.join(missing))
    # NODEPREP_TEST_REPOS=<folder> keeps the build between runs (rebuilt only when its inputs change)
    keep = os.environ.get('NODEPREP_TEST_REPOS')
    top = keep or str(tmp_path_factory.mktemp('repos'))
    out = os.path.join(top, 'repos')
    start = time.time()
    assert build.build(out, force=not keep, keys_dir=os.path.join(top, 'keys')) == 0
    sys.stderr.write('build.py took {0:.1f} s\n'.format(time.time() - start))
    return out


def rpm_q(path, fmt):
    return sh(['rpm', '-qp', '--nosignature', '--qf', fmt, path]).stdout


def rpms(d, name):
    """RPMs of exactly this name in folder d."""
    return [p for p in sorted(glob.glob(os.path.join(d, '*.rpm'))) if rpm_q(p, '%{NAME}') == name]


@pytest.mark.parametrize('el', ['el8', 'el9', 'el10'])
def test_dkms_only_in_epel_at_the_version_the_kmod_requires(repos, el):
    assert rpms(os.path.join(repos, el, 'baseos'), 'dkms') == []
    epel = rpms(os.path.join(repos, el, 'epel'), 'dkms')
    assert len(epel) == 1
    ver = rpm_q(epel[0], '%{VERSION}')
    assert tuple(int(x) for x in ver.split('.')) >= (3, 1, 8)
    for kmod in rpms(os.path.join(repos, el, 'cuda'), 'kmod-nvidia-open-dkms'):
        requires = sh(['rpm', '-qp', '--nosignature', '--requires', kmod]).stdout.splitlines()
        assert 'dkms >= 3.1.8' in requires


@pytest.mark.parametrize('el', ['el8', 'el9', 'el10'])
def test_el_fabric_manager_packages_per_branch(repos, el):
    cuda = os.path.join(repos, el, 'cuda')
    names = set(rpm_q(p, '%{NAME}-%{VERSION}-%{RELEASE}\n').strip() for p in glob.glob(os.path.join(cuda, '*.rpm')))
    assert 'nvidia-fabric-manager-570.172.08-1' in names
    assert 'libnvidia-nscq-570-570.172.08-1' in names
    assert 'nvidia-fabricmanager-580.95.05-1' in names
    assert 'libnvidia-nscq-580.95.05-1' in names
    assert 'nvidia-fabricmanager-590.48.01-1.{0}'.format(el) in names
    assert not any(n.startswith('nvidia-fabric-manager-58') or n.startswith('nvidia-fabric-manager-59')
                   for n in names)
    assert not any(n.startswith('nvidia-fabricmanager-570') for n in names)


def test_nvlsm_rpm_has_no_unit(repos):
    for el in ('el8', 'el9', 'el10'):
        (nvlsm,) = rpms(os.path.join(repos, el, 'cuda'), 'nvlsm')
        files = sh(['rpm', '-qlp', '--nosignature', nvlsm]).stdout.split()
        assert '/opt/nvidia/nvlsm/sbin/nvlsm' in files
        assert not [f for f in files if f.endswith('.service')]


def rpmdb_with(tmp_path, keyfile):
    db = tmp_path / ('db-' + os.path.basename(keyfile))
    db.mkdir()
    sh(['rpm', '--dbpath', str(db), '--import', keyfile])
    return str(db)


@pytest.mark.parametrize('el, repo, keyfile', [
    ('el8', 'baseos', 'RPM-GPG-KEY-Rocky-8'), ('el9', 'baseos', 'RPM-GPG-KEY-Rocky-9'),
    ('el10', 'baseos', 'RPM-GPG-KEY-Rocky-10'),
    ('el8', 'cuda', 'D42D0685.pub'), ('el9', 'cuda', 'D42D0685.pub'), ('el10', 'cuda', 'CDF6BA43.pub'),
    ('el8', 'epel', 'RPM-GPG-KEY-EPEL-8'), ('el9', 'epel', 'RPM-GPG-KEY-EPEL-9'),
    ('el10', 'epel', 'RPM-GPG-KEY-EPEL-10'),
    ('el8', 'elrepo', 'RPM-GPG-KEY-elrepo.org'), ('el9', 'elrepo', 'RPM-GPG-KEY-v2-elrepo.org'),
    ('el10', 'elrepo', 'RPM-GPG-KEY-v2-elrepo.org'),
])
def test_rpms_verify_with_their_repository_key_only(repos, tmp_path, el, repo, keyfile):
    d = os.path.join(repos, el, repo)
    pkgs = sorted(glob.glob(os.path.join(d, '*.rpm')))
    assert pkgs
    own = rpmdb_with(tmp_path, os.path.join(d, keyfile))
    for p in pkgs:
        assert sh(['rpm', '--dbpath', own, '-K', p]).stdout.strip().endswith('digests signatures OK'), p
    other_el = 'el10' if el != 'el10' else 'el9'
    other_key = os.path.join(repos, other_el, 'epel', 'RPM-GPG-KEY-EPEL-' + other_el[2:])
    other = rpmdb_with(tmp_path, other_key)
    proc = sh(['rpm', '--dbpath', other, '-K', pkgs[0]], check=False)
    assert proc.returncode != 0 and 'NOT OK' in proc.stdout


@pytest.mark.parametrize('el, repo', [('el8', 'powertools'), ('el9', 'crb'), ('el10', 'crb')])
def test_crb_rpms_verify_with_the_baseos_key(repos, tmp_path, el, repo):
    """The node's .repo file checks CRB / PowerTools with the Rocky key of BaseOS (gpgcheck=1), as on Rocky."""
    own = rpmdb_with(tmp_path, os.path.join(repos, el, 'baseos', 'RPM-GPG-KEY-Rocky-' + el[2:]))
    pkgs = sorted(glob.glob(os.path.join(repos, el, repo, '*.rpm')))
    assert pkgs
    for p in pkgs:
        assert sh(['rpm', '--dbpath', own, '-K', p]).stdout.strip().endswith('digests signatures OK'), p


def test_keys_are_distinct(repos):
    files = [os.path.join(repos, 'el9', 'cuda', 'D42D0685.pub'), os.path.join(repos, 'el10', 'cuda', 'CDF6BA43.pub'),
             os.path.join(repos, 'apt', 'cuda', '3bf863cc.pub')]
    files += [os.path.join(repos, el, 'epel', 'RPM-GPG-KEY-EPEL-' + el[2:]) for el in ('el8', 'el9', 'el10')]
    files += [os.path.join(repos, 'el9', 'elrepo', f) for f in ('RPM-GPG-KEY-elrepo.org', 'RPM-GPG-KEY-v2-elrepo.org')]
    fprs = []
    for f in files:
        out = sh(['gpg', '--batch', '--with-colons', '--import-options', 'show-only', '--import', f]).stdout
        fprs.append([line.split(':')[9] for line in out.splitlines() if line.startswith('fpr:')][0])
    assert len(set(fprs)) == len(files)
    assert read(repos, 'el8', 'cuda', 'D42D0685.pub') == read(repos, 'el9', 'cuda', 'D42D0685.pub')


def test_el10_cannot_import_the_elrepo_v1_key(repos, tmp_path):
    db = tmp_path / 'db'
    db.mkdir()
    v1 = os.path.join(repos, 'el10', 'elrepo', 'RPM-GPG-KEY-elrepo.org')
    proc = sh(['rpm', '--dbpath', str(db), '--import', v1], check=False)
    assert proc.returncode != 0 and 'import failed' in proc.stderr
    sh(['rpm', '--dbpath', str(db), '--import', os.path.join(repos, 'el10', 'elrepo', 'RPM-GPG-KEY-v2-elrepo.org')])
    for el in ('el8', 'el9'):
        sh(['rpm', '--dbpath', str(db), '--import', os.path.join(repos, el, 'elrepo', 'RPM-GPG-KEY-elrepo.org')])


def test_cuda_repomd_and_apt_release_are_signed(repos, tmp_path):
    home = tmp_path / 'gnupg'
    home.mkdir(mode=0o700)
    for el, key in (('el8', 'D42D0685.pub'), ('el10', 'CDF6BA43.pub')):
        ring = str(tmp_path / (el + '.gpg'))
        sh(['gpg', '--homedir', str(home), '--batch', '--yes', '--output', ring, '--dearmor',
            os.path.join(repos, el, 'cuda', key)])
        md = os.path.join(repos, el, 'cuda', 'repodata', 'repomd.xml')
        sh(['gpgv', '--keyring', ring, md + '.asc', md])
    apt = os.path.join(repos, 'apt', 'cuda')
    ring = str(tmp_path / 'apt.gpg')
    sh(['gpg', '--homedir', str(home), '--batch', '--yes', '--output', ring, '--dearmor',
        os.path.join(apt, '3bf863cc.pub')])
    sh(['gpgv', '--keyring', ring, os.path.join(apt, 'InRelease')])
    sh(['gpgv', '--keyring', ring, os.path.join(apt, 'Release.gpg'), os.path.join(apt, 'Release')])
    wrong = str(tmp_path / 'wrong.gpg')
    sh(['gpg', '--homedir', str(home), '--batch', '--yes', '--output', wrong, '--dearmor',
        os.path.join(repos, 'el9', 'cuda', 'D42D0685.pub')])
    assert sh(['gpgv', '--keyring', wrong, os.path.join(apt, 'InRelease')], check=False).returncode != 0


def apt_control(repos, name, version=None, repo='cuda'):
    stanzas = read(repos, 'apt', repo, 'Packages').split('\n\n')
    found = []
    for st in stanzas:
        fields = dict(l.split(': ', 1) for l in st.splitlines() if ': ' in l and not l.startswith(' '))
        if fields.get('Package') == name and (version is None or fields['Version'].startswith(version)):
            found.append(fields)
    return found


def test_apt_names_per_branch(repos):
    assert apt_control(repos, 'nvidia-fabricmanager-570')[0]['Version'] == '570.172.08-1'
    fm580 = apt_control(repos, 'nvidia-fabricmanager', '580')[0]
    assert fm580['Version'] == '580.95.05-1' and fm580['Provides'] == 'nvidia-fabricmanager-580'
    assert apt_control(repos, 'nvidia-fabricmanager-580') == []
    assert apt_control(repos, 'libnvidia-nscq-570') and apt_control(repos, 'libnvidia-nscq', '580')
    assert apt_control(repos, 'nvidia-dkms-580-open')[0]['Version'] == '580.95.05-0ubuntu1'
    assert apt_control(repos, 'nvidia-dkms-open')[0]['Version'] == '590.48.01-1ubuntu1'
    assert apt_control(repos, 'nvidia-dkms-590-open') == []
    assert 'nvidia-driver-580-open (= 580.95.05-0ubuntu1)' in apt_control(repos, 'nvidia-open', '580')[0]['Depends']


def test_ubuntu_archive_has_the_signed_driver_and_no_dkms_in_it(repos, tmp_path):
    # REALITY.md, "Ubuntu's signed driver" (R25): Ubuntu's -server series with its Ubuntu release, the modules per
    # kernel versioned like the kernel, the fabric manager and NSCQ with the branch in their names.  The driver meta
    # package pulls Ubuntu's DKMS package (NVIDIA/gpu-driver-container commit 8a29f61 purged it after installing
    # nvidia-driver-<B>-server); the headless no-DKMS meta package does not.
    driver = apt_control(repos, 'nvidia-driver-580-server-open', repo='debian')[0]
    assert driver['Version'] == '580.95.05-0ubuntu0.24.04.2'
    assert 'nvidia-dkms-580-server-open (= 580.95.05-0ubuntu0.24.04.2)' in driver['Depends'] and \
        'nvidia-utils-580-server (= 580.95.05-0ubuntu0.24.04.2)' in driver['Depends']
    headless = apt_control(repos, 'nvidia-headless-no-dkms-580-server-open', repo='debian')[0]
    assert 'dkms' not in headless['Depends'] and 'nvidia-compute-utils-580-server (= 580.95.05-0ubuntu0.24.04.2)' in \
        headless['Depends']
    dkms = apt_control(repos, 'nvidia-dkms-580-server-open', repo='debian')[0]
    assert dkms['Pre-Depends'] == 'dkms' and 'nvidia-dkms-580-open' in dkms['Conflicts']
    fm = apt_control(repos, 'nvidia-fabricmanager-580', repo='debian')[0]
    assert fm['Provides'] == 'nvidia-fabricmanager' and fm['Version'] == '580.95.05-0ubuntu0.24.04.1'
    assert fm['Depends'] == 'nvidia-kernel-common-580-server-580.95.05'
    assert apt_control(repos, 'libnvidia-nscq-580', repo='debian')
    prefix = 'linux-modules-nvidia-580-server-open-'
    # The per-kernel packages (the kernel part starts with a digit; the meta package ends in a flavour name).
    kernels = [f['Package'] for f in read(repos, 'apt', 'debian', 'Packages').split('\n\n') for f in [dict(
        line.split(': ', 1) for line in f.splitlines() if ': ' in line)] if f.get('Package', '').startswith(
        prefix) and f['Package'][len(prefix):][:1].isdigit()]
    assert sorted(kernels) == sorted('linux-modules-nvidia-580-server-open-' + k
                                     for k in (build.DEB_OTHER_KERNEL, os.uname()[2]))
    # The flavour's meta package still names the running kernel's modules; linux-image-generic already brings a
    # newer kernel, for which there are none (REALITY.md, "A kernel without signed modules").
    meta = apt_control(repos, 'linux-modules-nvidia-580-server-open-generic', repo='debian')[0]
    assert meta['Depends'].startswith('linux-modules-nvidia-580-server-open-{0}, '.format(os.uname()[2]))
    newer = build.ubuntu_newer_kernel(os.uname()[2])
    assert apt_control(repos, 'linux-image-generic', repo='debian')[0]['Depends'] == 'linux-image-' + newer
    assert apt_control(repos, 'linux-image-' + newer, repo='debian') and \
        apt_control(repos, 'linux-headers-' + newer, repo='debian')
    assert 'linux-modules-nvidia-580-server-open-' + newer not in kernels
    filename = os.path.basename(glob.glob(os.path.join(
        repos, 'apt', 'debian', 'linux-modules-nvidia-580-server-open-{0}_*.deb'.format(build.DEB_OTHER_KERNEL)))[0])
    root = tmp_path / 'modules'
    sh(['dpkg-deb', '-x', os.path.join(repos, 'apt', 'debian', filename), str(root)])
    ko = read(str(root), 'lib/modules', build.DEB_OTHER_KERNEL, 'kernel/nvidia-580srv-open/nvidia.ko')
    assert 'signer=canonical' in ko and 'version=580.95.05' in ko


def deb_extract(repos, tmp_path, filename):
    root = tmp_path / filename
    sh(['dpkg-deb', '-x', os.path.join(repos, 'apt', 'cuda', filename), str(root)])
    return str(root)


def test_apt_persistenced_unit_is_stock_and_dkms_registers_nvidia(repos, tmp_path):
    root = deb_extract(repos, tmp_path, 'nvidia-persistenced_580.95.05-0ubuntu1_amd64.deb')
    unit = read(root, 'usr/lib/systemd/system/nvidia-persistenced.service')
    assert '--no-persistence-mode' in unit and '[Install]' not in unit and 'StopWhenUnneeded=true' in unit
    root = deb_extract(repos, tmp_path, 'nvidia-dkms-580-open_580.95.05-0ubuntu1_amd64.deb')
    conf = read(root, 'usr/src/nvidia-580.95.05/dkms.conf')
    assert 'PACKAGE_NAME="nvidia"' in conf and 'TESTBED_FLAVOUR="open"' in conf


def dnf_resolve(repos, tmp_path, el, repo_names, specs):
    """dnf's answer for installing specs into an empty root from the given local repositories (signatures: the tests above)."""
    root = tmp_path / ('root-' + '-'.join(repo_names))
    root.mkdir(parents=True)
    argv = ['dnf', '--installroot', str(root), '--releasever', el[2:], '--setopt=reposdir=/nonexistent',
            '--setopt=cachedir=' + str(tmp_path / 'cache'), '--setopt=install_weak_deps=False',
            '--setopt=*.gpgcheck=0', '--disableplugin=*']
    for name in repo_names:
        argv.append('--repofrompath={0},file://{1}'.format(name, os.path.join(repos, el, name)))
    return sh(argv + ['install', '--assumeno'] + specs, check=False)


def test_kmod_needs_epel(repos, tmp_path):
    proc = dnf_resolve(repos, tmp_path, 'el10', ['baseos', 'cuda'], ['kmod-nvidia-open-dkms-3:580.95.05'])
    assert proc.returncode != 0
    assert 'nothing provides dkms >= 3.1.8' in proc.stdout + proc.stderr
    proc = dnf_resolve(repos, tmp_path, 'el10', ['baseos', 'cuda', 'epel'], ['kmod-nvidia-open-dkms-3:580.95.05'])
    assert re.search(r'^\s*dkms\s', proc.stdout, re.M), proc.stdout + proc.stderr


def test_compute_only_set_leaves_the_desktop_out(repos, tmp_path):
    compute = dnf_resolve(repos, tmp_path / 'a', 'el10', ['baseos', 'cuda', 'epel'],
                          ['nvidia-driver-cuda-3:580.95.05', 'kmod-nvidia-open-dkms-3:580.95.05'])
    full = dnf_resolve(repos, tmp_path / 'b', 'el10', ['baseos', 'cuda', 'epel'], ['nvidia-open-3:580.95.05'])
    for desktop in ('xorg-x11-server-Xorg', 'libglvnd-glx', 'nvidia-settings'):
        assert not re.search(r'^\s*{0}\s'.format(desktop), compute.stdout, re.M), compute.stdout
        assert re.search(r'^\s*{0}\s'.format(desktop), full.stdout, re.M), full.stdout
    assert re.search(r'^\s*nvidia-persistenced\s', compute.stdout, re.M)


@pytest.mark.parametrize('el', ['el8', 'el9', 'el10'])
def test_el_dcgm_packages_have_nvidia_names_epoch_and_release(repos, el):
    cuda = os.path.join(repos, el, 'cuda')
    names = set(rpm_q(p, '%{NAME}-%{EPOCH}:%{VERSION}-%{RELEASE}\n').strip()
                for p in glob.glob(os.path.join(cuda, 'datacenter-gpu-manager-4-*.rpm')))
    for version in build.DCGM_VERSIONS:
        for name in ('core', 'cuda12', 'cuda13'):
            assert 'datacenter-gpu-manager-4-{0}-1:{1}-1'.format(name, version) in names
    cuda13 = [p for p in rpms(cuda, 'datacenter-gpu-manager-4-cuda13') if '4.5.2' in p][0]
    requires = sh(['rpm', '-qp', '--nosignature', '--requires', cuda13]).stdout.splitlines()
    assert 'datacenter-gpu-manager-4-core = 1:4.5.2-1' in requires
    core = [p for p in rpms(cuda, 'datacenter-gpu-manager-4-core') if '4.5.2' in p][0]
    files = sh(['rpm', '-qlp', '--nosignature', core]).stdout.split()
    assert files == ['/usr/bin/dcgmi', '/usr/bin/nv-hostengine', '/usr/lib/systemd/system/nvidia-dcgm.service']
    # NVIDIA/DCGM cmake/packaging.cmake: the 4.x core conflicts with DCGM 3.x (datacenter-gpu-manager, epoch 1).
    assert sh(['rpm', '-qp', '--nosignature', '--conflicts', core]).stdout.split() == ['datacenter-gpu-manager']
    dcgm3 = rpms(cuda, 'datacenter-gpu-manager')
    dcgm3 = [p for p in dcgm3 if os.path.basename(p).startswith('datacenter-gpu-manager-3.')]
    assert [rpm_q(p, '%{NAME}-%{EPOCH}:%{VERSION}-%{RELEASE}') for p in dcgm3] == ['datacenter-gpu-manager-1:3.3.9-1']
    assert sh(['rpm', '-qlp', '--nosignature', dcgm3[0]]).stdout.split() == [
        '/usr/bin/dcgmi', '/usr/bin/nv-hostengine', '/usr/lib/systemd/system/dcgm.service',
        '/usr/lib/systemd/system/nvidia-dcgm.service']


def test_apt_dcgm_packages(repos, tmp_path):
    cuda = os.path.join(repos, 'apt', 'cuda')
    debs = sorted(os.path.basename(p) for p in glob.glob(os.path.join(cuda, 'datacenter-gpu-manager-4-*.deb')))
    assert 'datacenter-gpu-manager-4-cuda13_4.5.2-1_amd64.deb' in debs
    deb = os.path.join(cuda, 'datacenter-gpu-manager-4-cuda13_4.5.2-1_amd64.deb')
    fields = sh(['dpkg-deb', '-f', deb, 'Version', 'Depends']).stdout
    assert 'Version: 1:4.5.2-1' in fields
    assert 'Depends: datacenter-gpu-manager-4-core (= 1:4.5.2-1)' in fields
    core = os.path.join(cuda, 'datacenter-gpu-manager-4-core_4.5.2-1_amd64.deb')
    assert sh(['dpkg-deb', '-f', core, 'Conflicts']).stdout.strip() == 'datacenter-gpu-manager'
    dcgm3 = os.path.join(cuda, 'datacenter-gpu-manager_3.3.9_amd64.deb')
    assert sh(['dpkg-deb', '-f', dcgm3, 'Version']).stdout.strip() == '1:3.3.9'
    root = deb_extract(repos, tmp_path, 'datacenter-gpu-manager_3.3.9_amd64.deb')
    unit = read(root, 'usr/lib/systemd/system/nvidia-dcgm.service')
    assert 'Conflicts=dcgm.service' in unit and 'Alias=' not in unit
    assert 'Conflicts=nvidia-dcgm.service' in read(root, 'usr/lib/systemd/system/dcgm.service')


# ------------------------------------------------------------------ R21, R22 (REALITY.md)

@pytest.mark.parametrize('version, release', [('570.172.08', '570.172.08-1'), ('580.95.05', '580.95.05-1'),
                                              ('590.48.01', '590.48.01-1ubuntu1'),
                                              ('595.91.07', '595.91.07-1ubuntu1')])
def test_apt_extras_release_per_branch(version, release):
    assert build.apt_extra_version(version) == release


@pytest.mark.parametrize('version, name', [('570.172.08', 'libnvsdm-570'), ('580.95.05', 'libnvsdm'),
                                           ('590.48.01', 'libnvsdm')])
def test_nvsdm_named_by_branch(version, name):
    assert build.nvsdm_name(version) == name


def _ib_tree(tmp_path, vpd):
    ib = tmp_path / 'infiniband'
    ca = ib / 'mlx5_0'
    (ca / 'device').mkdir(parents=True)
    (ca / 'device' / 'vpd').write_bytes(vpd)
    for name, value in (('hca_type', 'MT4129'), ('fw_ver', '28.42.1274'), ('node_guid', 'e09d:7303:00e4:00e8')):
        (ca / name).write_text(value + '\n')
    return ib


def _script(tmp_path, template, name):
    path = tmp_path / name
    path.write_text(build.fill(template, VERSION='1.0'))
    path.chmod(0o755)
    return str(path)


def test_ibstat_prints_the_dgx_b200_layout(tmp_path):
    # Layout of siderolabs/extensions nvidia-fabricmanager-wrapper/fixtures/dgxb200-ibstat-mlx5_0.
    ib = _ib_tree(tmp_path, b'SMDL=SW_MNG')
    ibstat = _script(tmp_path, 'ibstat.in', 'ibstat')
    env = dict(os.environ, GPU_DOUBLE_IB_DIR=str(ib), LC_ALL='C')
    out = subprocess.run([ibstat, 'mlx5_0'], env=env, capture_output=True, text=True, check=True).stdout
    lines = [line.strip() for line in out.splitlines()]
    assert lines[0] == "CA 'mlx5_0'"
    for want in ('CA type: MT4129', 'Firmware version: 28.42.1274', 'Node GUID: 0xe09d730300e400e8',
                 'Port GUID: 0xe09d730300e400e8', 'Link layer: InfiniBand'):
        assert want in lines
    assert subprocess.run([ibstat, '-l'], env=env, capture_output=True, text=True, check=True).stdout == 'mlx5_0\n'
    missing = subprocess.run([ibstat, 'mlx5_9'], env=env, capture_output=True, text=True, check=False)
    assert missing.returncode != 0 and "mlx5_9" in missing.stderr


@pytest.mark.parametrize('with_ibstat', [False, True])
def test_fabric_manager_start_needs_ibstat_on_nvlink5(tmp_path, with_ibstat):
    ib = _ib_tree(tmp_path, b'\x82MLX:SMDL=SW_MNG:MODL=C7010Z')
    start = _script(tmp_path, 'fabricmanager-start.sh.in', 'nvidia-fabricmanager-start.sh')
    bindir = tmp_path / 'bin'
    bindir.mkdir()
    # no mkdir: the script's run directory is not made on this machine
    for tool in ('sed', 'head', 'grep', 'tr', 'cat', 'printf'):
        found = shutil.which(tool)
        if found:
            os.symlink(found, str(bindir / tool))
    if with_ibstat:
        os.symlink(_script(tmp_path, 'ibstat.in', 'ibstat.real'), str(bindir / 'ibstat'))
    env = {'PATH': str(bindir), 'GPU_DOUBLE_IB_DIR': str(ib), 'LC_ALL': 'C'}
    proc = subprocess.run(['/bin/sh', start, '--mode', 'start'], env=env, capture_output=True, text=True, check=False)
    assert proc.returncode == 1
    assert 'Detected NVL5 system' in proc.stdout
    if with_ibstat:
        # Past the port lookup; this machine has no NVLSM, so the script stops at the next step.
        assert 'SW_MNG port mlx5_0, port GUID 0xe09d730300e400e8' in proc.stdout
        assert 'NVLSM is not installed' in proc.stdout
    else:
        assert 'ibstat: command not found; install infiniband-diags' in proc.stdout
        assert 'port GUID' not in proc.stdout


def test_fleet_branch_per_kind(monkeypatch):
    monkeypatch.setenv('TESTBED_BRANCHES', 'ubuntu2404-h200=590')
    fleet = testbed.plan_fleet(2, kinds='ubuntu2404-h200,el10-b200')
    assert [(n['name'], n['branch']) for n in fleet] == [('ubuntu2404-h200-01', '590'), ('el10-b200-01', '580')]
    monkeypatch.setenv('TESTBED_BRANCHES', 'ubuntu2404=590')
    with pytest.raises(testbed.TestbedError, match='TESTBED_BRANCHES'):
        testbed.plan_fleet(1)


@pytest.mark.parametrize('el', ['el8', 'el9', 'el10'])
def test_el_nvlink5_packages(repos, el):
    cuda = os.path.join(repos, el, 'cuda')
    names = set(rpm_q(p, '%{NAME}-%{VERSION}\n').strip() for p in glob.glob(os.path.join(cuda, '*.rpm')))
    assert {'libnvsdm-570-570.172.08', 'libnvsdm-580.95.05', 'libnvsdm-590.48.01'} <= names
    (diags,) = rpms(os.path.join(repos, el, 'baseos'), 'infiniband-diags')
    assert '/usr/sbin/ibstat' in sh(['rpm', '-qlp', '--nosignature', diags]).stdout.split()


def test_apt_extras_carry_nvidias_release(repos):
    cuda = os.path.join(repos, 'apt', 'cuda')
    versions = {}
    for deb in glob.glob(os.path.join(cuda, '*.deb')):
        fields = sh(['dpkg-deb', '-f', deb, 'Package', 'Version']).stdout.splitlines()
        versions.setdefault(fields[0].split(': ', 1)[1], set()).add(fields[1].split(': ', 1)[1])
    for name in ('nvidia-fabricmanager', 'libnvidia-nscq', 'libnvsdm', 'nvidia-imex'):
        assert {'580.95.05-1', '590.48.01-1ubuntu1'} <= versions[name]
    assert versions['nvidia-fabricmanager-570'] == {'570.172.08-1'}
    assert versions['libnvsdm-570'] == {'570.172.08-1'}
    assert '/usr/sbin/ibstat' in sh(['dpkg-deb', '-c', glob.glob(os.path.join(cuda, 'infiniband-diags_*.deb'))[0]]).stdout


# ------------------------------------------------------------------ issue 28: the perf_tools role's packages

@pytest.mark.parametrize('el', ['el8', 'el9', 'el10'])
def test_el_perf_tools_packages(repos, el):
    def nvrs(folder, pattern='*.rpm'):
        return set(rpm_q(p, '%{NAME}-%{VERSION}-%{RELEASE}\n').strip()
                   for p in glob.glob(os.path.join(repos, el, folder, pattern)))
    cuda = nvrs('cuda')
    # NVIDIA's names and versions (REALITY.md "Performance tools")
    for name in ('cuda-nvcc-12-8-12.8.93-1', 'cuda-cudart-devel-12-8-12.8.90-1', 'cuda-nvcc-13-0-13.0.88-1',
                 'cuda-cudart-devel-13-0-13.0.96-1', 'cuda-driver-devel-13-0-13.0.96-1', 'cuda-nvcc-13-1-13.1.80-1',
                 'cuda-nvml-devel-13-1-13.1.68-1', 'libnccl-2.27.7-1+cuda12.9', 'libnccl-devel-2.27.7-1+cuda13.0'):
        assert name in cuda
    base = set(n.rsplit('-', 2)[0] for n in nvrs('baseos'))
    assert {'make', 'gcc-c++', 'cmake', 'boost-devel'} <= base and 'boost-static' not in base
    extra = 'powertools' if el == 'el8' else 'crb'
    assert [n.rsplit('-', 2)[0] for n in nvrs(extra)] == ['boost-static']
    nvcc = rpms(os.path.join(repos, el, 'cuda'), 'cuda-nvcc-12-8')[0]
    assert sh(['rpm', '-qlp', '--nosignature', nvcc]).stdout.split() == ['/usr/local/cuda-12.8/bin/nvcc']
    assert 'gpu-double nvcc --cuda-version 12.8.93 --cuda-home /usr/local/cuda-12.8 -- "$@"' in \
        sh(['rpm2cpio', nvcc]).stdout
    devel = [p for p in rpms(os.path.join(repos, el, 'cuda'), 'libnccl-devel') if 'cuda12.9' in p][0]
    requires = sh(['rpm', '-qp', '--nosignature', '--requires', devel]).stdout.splitlines()
    assert not [r for r in requires if r.startswith('libnccl')]  # as NVIDIA's nccl.spec.in: no dependency
    assert sh(['rpm', '-qlp', '--nosignature', devel]).stdout.split() == ['/usr/include/nccl.h', '/usr/lib64/libnccl.so']


def test_boost_static_needs_crb(repos, tmp_path):
    proc = dnf_resolve(repos, tmp_path / 'a', 'el9', ['baseos', 'cuda'], ['boost-static'])
    assert proc.returncode != 0 and 'No match for argument: boost-static' in proc.stdout + proc.stderr
    proc = dnf_resolve(repos, tmp_path / 'b', 'el9', ['baseos', 'crb', 'cuda'], ['boost-static'])
    assert re.search(r'^\s*boost-devel\s', proc.stdout, re.M), proc.stdout + proc.stderr


def test_apt_perf_tools_packages(repos):
    cuda = sorted(os.path.basename(p) for p in glob.glob(os.path.join(repos, 'apt', 'cuda', '*.deb')))
    for name in ('cuda-nvcc-12-8_12.8.93-1_amd64.deb', 'cuda-cudart-dev-13-0_13.0.96-1_amd64.deb',
                 'cuda-driver-dev-13-0_13.0.96-1_amd64.deb', 'cuda-nvml-dev-13-1_13.1.68-1_amd64.deb',
                 'libnccl2_2.27.7-1+cuda13.0_amd64.deb', 'libnccl-dev_2.27.7-1+cuda12.9_amd64.deb'):
        assert name in cuda
    dev = os.path.join(repos, 'apt', 'cuda', 'libnccl-dev_2.27.7-1+cuda13.0_amd64.deb')
    assert sh(['dpkg-deb', '-f', dev, 'Depends']).stdout == 'libnccl2 (= 2.27.7-1+cuda13.0)\n'
    assert './usr/lib/x86_64-linux-gnu/libnccl.so -> libnccl.so.2' in sh(['dpkg-deb', '-c', dev]).stdout
    debian = sorted(os.path.basename(p) for p in glob.glob(os.path.join(repos, 'apt', 'debian', '*.deb')))
    for name in ('make_4.3-4.1build2_amd64.deb', 'g++_13.2.0-7ubuntu1_amd64.deb', 'cmake_3.28.3-1build7_amd64.deb',
                 'libboost-program-options-dev_1.83.0.1ubuntu2_amd64.deb'):
        assert name in debian
    boost = sh(['dpkg-deb', '-c', os.path.join(repos, 'apt', 'debian',
                                               'libboost-program-options-dev_1.83.0.1ubuntu2_amd64.deb')]).stdout
    assert './usr/lib/x86_64-linux-gnu/libboost_program_options.a' in boost
    gxx = os.path.join(repos, 'apt', 'debian', 'g++_13.2.0-7ubuntu1_amd64.deb')
    assert sh(['dpkg-deb', '-f', gxx, 'Version']).stdout == '4:13.2.0-7ubuntu1\n'


def test_release_tarballs_are_stable_and_listed(repos, tmp_path):
    import tarfile
    folder = os.path.join(repos, 'src')
    sums = dict(reversed(line.split('  ')) for line in open(os.path.join(folder, 'SHA256SUMS')).read().splitlines())
    assert sorted(sums) == ['nccl-tests-2.17.9.tar.gz', 'nvbandwidth-0.8.tar.gz']
    for name, digest in sums.items():
        with open(os.path.join(folder, name), 'rb') as handle:
            assert hashlib.sha256(handle.read()).hexdigest() == digest
    with tarfile.open(os.path.join(folder, 'nccl-tests-2.17.9.tar.gz')) as tar:
        names = tar.getnames()
        assert names[0] == 'nccl-tests-2.17.9' and 'nccl-tests-2.17.9/src/Makefile' in names
        assert b'// stand-in-program: all_reduce_perf 2.17.9' in tar.extractfile('nccl-tests-2.17.9/src/all_reduce.cu').read()
    with tarfile.open(os.path.join(folder, 'nvbandwidth-0.8.tar.gz')) as tar:
        assert tar.extractfile('nvbandwidth-0.8/version.h').read().endswith(b'"v0.8"\n')
    # the same inputs make the same bytes (a site's checksum stays valid)
    again = tmp_path / 'again'
    os.makedirs(str(again))
    build.source_tarballs(str(again))
    assert open(str(again / 'src' / 'SHA256SUMS')).read() == open(os.path.join(folder, 'SHA256SUMS')).read()

# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Ubuntu's Canonical-signed driver flavour (R25; plugins/module_utils/rules/_driver_ubuntu.py and its use in
_driver.driver_plan and the role plan).

The installed packages are dpkg-query lines in the collection's own query format (_package_db.DPKG_FORMAT), with the
names and versions of Ubuntu 24.04's archive (tests/testbed/REALITY.md, "Ubuntu's signed driver"): the driver
580.95.05-0ubuntu0.24.04.2, the modules of kernel 6.8.0-60-generic versioned like that kernel.  Each row says which
flavour the node has, whether the source setting is refused (naming both flavours) and, for source ubuntu, what is
installed for the kernel that boots next (never an NVIDIA repository package).
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import copy

import pytest

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules import _driver as P
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers import _driver_packages
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.collect._driver_node import read_driver_node
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.plans import _plan
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules import _driver_ubuntu as U
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.plans import _plan_nvidia_driver as D
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.rules import _readiness
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._package_db import parse_dpkg
from ansible_collections.gpufleet.nodeprep.plugins.plugin_utils import _plans
from ansible_collections.gpufleet.nodeprep.tests.unit.nodeprep_harness import FakeModule

UBUNTU = {'os_family': 'Debian', 'distribution': 'Ubuntu', 'distribution_version': '24.04',
          'distribution_major_version': '24', 'architecture': 'x86_64'}
EL9 = {'os_family': 'RedHat', 'distribution': 'Rocky', 'distribution_version': '9.6',
       'distribution_major_version': '9', 'architecture': 'x86_64'}
K_RUN = '6.8.0-60-generic'
K_NEXT = '6.8.0-62-generic'
VERSION = '580.95.05'
UBU_V = VERSION + '-0ubuntu0.24.04.2'
H100_PCI = {'gpus': [{'bus_id': '0000:1b:00.0', 'device_id': '0x2330'}], 'gpu_count': 1,
            'nvswitches': [{'bus_id': '0000:05:00.0', 'device_id': '0x22a3'}], 'nvswitch_count': 1,
            'nvlink5_bridges': [], 'nvlink5_bridge_count': 0, 'nvswitch_fabric': 'pci'}
NO_SWITCH_PCI = dict(H100_PCI, nvswitches=[], nvswitch_count=0, nvswitch_fabric='none')
SMI = {'present': True, 'error': None, 'driver_version': VERSION,
       'gpus': [{'index': 0, 'architecture': 'Hopper', 'pci_device_id': '0x233010DE'}]}
NO_SMI = {'present': False, 'error': 'nvidia-smi not found', 'driver_version': None, 'gpus': []}
LOADED = {'loaded': True, 'version': VERSION, 'flavour': 'open'}

SETTINGS = {'method': 'repo', 'source': 'nvidia', 'branch': '580', 'version': '', 'module_type': 'open',
            'package_set': 'full', 'fabricmanager': 'auto', 'nvlsm': 'auto', 'nscq': True, 'imex': False,
            'persistenced': True, 'persistence_conflicting_units': [], 'repo_url': '', 'repo_gpgcheck': True,
            'repo_gpgkey': '', 'epel': 'auto', 'epel_url': '', 'epel_gpgkey': '', 'open_required_device_ids': [],
            'reboot_ok': True}


def dpkg(*rows):
    """The installed packages as _package_db.parse_dpkg reads dpkg-query -W -f DPKG_FORMAT; rows (name, version[,
    status])."""
    lines = ['{0}\t{1}\t{2}\tamd64'.format(r[0], r[1], r[2] if len(r) > 2 else 'ii ') for r in rows]
    return parse_dpkg('\n'.join(lines) + '\n')[0]


# Ubuntu's signed driver, installed the way the GPU Operator's precompiled container and ubuntu-drivers install it:
# the driver meta package, its libraries and tools, the modules of the running kernel and their meta package.
UBUNTU_SIGNED = [
    ('nvidia-driver-580-server-open', UBU_V), ('nvidia-kernel-common-580-server', UBU_V),
    ('libnvidia-compute-580-server', UBU_V), ('nvidia-utils-580-server', UBU_V),
    ('nvidia-compute-utils-580-server', UBU_V),
    ('linux-modules-nvidia-580-server-open-' + K_RUN, '6.8.0-60.63+1'),
    ('linux-modules-nvidia-580-server-open-generic', '6.8.0-60.63+1'),
]
# NVIDIA's repository on Ubuntu (R1/R8): the meta, the branch packages, DKMS, the pinning package.
NVIDIA_REPO = [
    ('nvidia-open', VERSION + '-0ubuntu1'), ('nvidia-driver-580-open', VERSION + '-0ubuntu1'),
    ('nvidia-dkms-580-open', VERSION + '-0ubuntu1'), ('nvidia-kernel-common-580', VERSION + '-0ubuntu1'),
    ('nvidia-driver-pinning-580', VERSION + '-0ubuntu1'),
]


# ------------------------------------------------------------------------------------------------ the flavour

@pytest.mark.parametrize('rows, kind, branch, modules, version', [
    (UBUNTU_SIGNED, 'ubuntu', '580', {K_RUN: 'linux-modules-nvidia-580-server-open-' + K_RUN}, VERSION),
    (NVIDIA_REPO, 'nvidia', '', {}, ''),
    # 590 in NVIDIA's repository: no branch in the names (R1), release -1ubuntu1.
    ([('nvidia-open', '590.48.01-1ubuntu1'), ('nvidia-dkms-open', '590.48.01-1ubuntu1')], 'nvidia', '', {}, ''),
    (UBUNTU_SIGNED + NVIDIA_REPO, 'both', '580', {K_RUN: 'linux-modules-nvidia-580-server-open-' + K_RUN},
     VERSION),
    ([('dkms', '3.0.11-1ubuntu13')], 'none', '', {}, ''),
    # A pinning package left by an earlier run (NVIDIA's repository was set up, its driver never installed).
    (UBUNTU_SIGNED + [('nvidia-driver-pinning-580', VERSION + '-0ubuntu1')], 'ubuntu', '580',
     {K_RUN: 'linux-modules-nvidia-580-server-open-' + K_RUN}, VERSION),
    # Removed with its configuration kept ('rc'): not installed.
    ([('nvidia-driver-580-server-open', UBU_V, 'rc '),
      ('linux-modules-nvidia-580-server-open-' + K_RUN, '6.8.0-60.63+1', 'rc ')], 'none', '', {}, ''),
    # Only the modules (a node that installed them without the meta package) is Ubuntu's flavour too.
    ([('linux-modules-nvidia-580-server-open-' + K_RUN, '6.8.0-60.63+1')], 'ubuntu', '580',
     {K_RUN: 'linux-modules-nvidia-580-server-open-' + K_RUN}, ''),
])
def test_flavour_from_the_installed_packages(rows, kind, branch, modules, version):
    found = U.flavour(dpkg(*rows))
    assert (found['flavour'], found['branch'], found['modules'], found['version']) == (kind, branch, modules, version)


def test_meta_packages_are_not_kernels():
    found = U.flavour(dpkg(('linux-modules-nvidia-580-server-open-generic-hwe-24.04', '6.11.0-29.29~24.04.1'),
                           ('linux-modules-nvidia-580-server-open-generic', '6.8.0-60.63+1')))
    assert found['modules'] == {}
    assert found['meta'] == ['linux-modules-nvidia-580-server-open-generic',
                             'linux-modules-nvidia-580-server-open-generic-hwe-24.04']


def test_the_driver_node_reader_keeps_the_module_packages():
    # _driver_node keeps only what keep_package accepts: without this the flavour could not be seen.
    assert _driver_packages.keep_package('linux-modules-nvidia-580-server-open-' + K_RUN)
    assert _driver_packages.keep_package('linux-modules-nvidia-580-server-open-generic')
    assert not _driver_packages.keep_package('linux-modules-extra-' + K_RUN)


# ------------------------------------------------------------------------------------------------ the plan

def facts(rows, running=K_RUN, default=None, loaded=None, smi=None, pci=None, secure=None, os_facts=None):
    kernel_state = {'running': running, 'default': default or running, 'pci': copy.deepcopy(pci or NO_SWITCH_PCI),
                    'nouveau': {'loaded': False, 'blacklisted': True},
                    'nvidia_module': loaded or {'loaded': False, 'version': None, 'flavour': None},
                    'dkms': [], 'secure_boot': secure or {'enabled': False, 'source': 'x', 'dkms_mok': {}}}
    return {'os': os_facts or UBUNTU, 'kernel_state': kernel_state, 'nvidia': copy.deepcopy(smi or NO_SMI),
            'services': {'nvidia-persistenced.service': {'status': 'static', 'state': 'running'}}}, \
        {'packages': dpkg(*rows), 'apt_holds': []}


def settings(**kw):
    out = dict(SETTINGS)
    out.update(kw)
    return out


def nvidia_names(plan):
    """Every package the plan would install or remove that is NVIDIA's repository's, not Ubuntu's archive's."""
    names = [p.split('=')[0] for p in plan['install']['packages'] + plan['extras']['packages']] + \
        [plan['install']['pinning_package'] or '']
    nvidia_extras = ('nvidia-persistenced', 'nvidia-fabricmanager', 'libnvidia-nscq')
    return [n for n in names if n and (U.NVIDIA_REPO_RE.match(n) or n in nvidia_extras)]


def signed_node(**kw):
    kw.setdefault('loaded', dict(LOADED))
    kw.setdefault('smi', SMI)
    return facts(UBUNTU_SIGNED, **kw)


@pytest.mark.parametrize('default', [K_RUN, K_NEXT])
def test_signed_node_with_source_nvidia_is_refused_naming_both_flavours(default):
    # The collection's old behaviour with a kernel update pending: no DKMS build for the next kernel, so "missing",
    # and NVIDIA's nvidia-open installed over Ubuntu's packages.  Now refused before anything is planned.
    node_facts, node = signed_node(default=default)
    plan = P.driver_plan(node_facts, settings(), node=node)
    assert list(plan['refused']) == ['flavour']
    msg = plan['refused']['flavour']
    assert "Ubuntu's Canonical-signed NVIDIA driver" in msg and "NVIDIA's repository packages" in msg
    assert 'nvidia-headless-no-dkms-580-server-open' in msg and 'nodeprep_nvidia_driver_source=ubuntu' in msg
    assert 'install' not in plan


def test_nvidia_node_with_source_ubuntu_is_refused_naming_both_flavours():
    node_facts, node = facts(NVIDIA_REPO, loaded=dict(LOADED), smi=SMI)
    plan = P.driver_plan(node_facts, settings(source='ubuntu'), node=node)
    msg = plan['refused']['flavour']
    assert "NVIDIA's driver from NVIDIA's repository" in msg and "Ubuntu's Canonical-signed driver" in msg
    assert 'nvidia-open' in msg and 'nodeprep_nvidia_driver_source=nvidia' in msg


@pytest.mark.parametrize('os_facts, kw, needle', [
    (EL9, {}, 'this host runs Rocky 9.6. Allowed here: nvidia'),
    (dict(UBUNTU, distribution='Debian', distribution_version='12'), {}, 'this host runs Debian 12'),
    (UBUNTU, {'method': 'runfile', 'version': VERSION}, 'nodeprep_nvidia_driver_method=runfile cannot install'),
])
def test_source_ubuntu_refused_where_it_cannot_be_used(os_facts, kw, needle):
    node_facts, node = facts([], os_facts=os_facts)
    plan = P.driver_plan(node_facts, settings(source='ubuntu', **kw), node=node)
    assert needle in plan['refused']['source']


def test_source_nvidia_on_a_fresh_ubuntu_node_is_unchanged():
    node_facts, node = facts([])
    plan = P.driver_plan(node_facts, settings(), node=node)
    assert plan['refusals'] == []
    assert (plan['source'], plan['flavour'], plan['ubuntu']) == ('nvidia', 'none', None)
    assert plan['install']['packages'] == ['nvidia-open']


def test_adopted_node_with_a_kernel_update_gets_the_modules_of_the_next_kernel():
    node_facts, node = signed_node(default=K_NEXT, pci=H100_PCI)
    plan = P.driver_plan(node_facts, settings(source='ubuntu'), node=node)
    assert plan['refusals'] == [] and plan['ok'] is False
    # The archive's userspace without DKMS (nvidia-driver-580-server-open would pull nvidia-dkms-580-server-open:
    # NVIDIA/gpu-driver-container commit 8a29f61), nvidia-smi, the signed modules of the next kernel.
    assert plan['install']['packages'] == ['nvidia-headless-no-dkms-580-server-open', 'nvidia-utils-580-server',
                                           'linux-modules-nvidia-580-server-open-' + K_NEXT]
    assert (plan['install']['pinning_package'], plan['install']['unpin']) == (None, [])
    assert (plan['installed_version'], plan['installed_source']) == (
        VERSION, 'package nvidia-kernel-common-580-server')
    # Ubuntu's archive has the fabric manager and NSCQ (with the branch in the name) at the driver's version.
    assert plan['extras']['packages'] == ['nvidia-compute-utils-580-server',
                                          'nvidia-fabricmanager-580=580.95.05-*', 'libnvidia-nscq-580=580.95.05-*']
    assert plan['extras']['hold'] == ['nvidia-fabricmanager-580', 'libnvidia-nscq-580']
    assert plan['repo']['needed'] is False
    assert plan['load']['dkms_build'] is False
    assert nvidia_names(plan) == []


def test_check_mode_predicts_the_missing_extras():
    # apt's check mode would "install" the fabric manager, and the hold after it would find no package: predicted.
    node_facts, node = signed_node(pci=H100_PCI)
    plan = P.driver_plan(node_facts, settings(source='ubuntu'), node=node, check_mode=True)
    assert plan['extras']['missing'] == ['nvidia-fabricmanager-580=580.95.05-*', 'libnvidia-nscq-580=580.95.05-*']
    assert plan['predict']['extras'] is True
    assert P.driver_plan(node_facts, settings(source='ubuntu'), node=node)['predict']['extras'] is False


def test_check_mode_says_an_installed_driver_that_is_not_loaded_will_load():
    # The fault ubuntu-signed: Ubuntu's driver installed, nouveau still holding the GPUs; the run reboots and the
    # settings roles must predict from the driver's defaults (site.yml's check mode on the fleet).
    node_facts, node = facts(UBUNTU_SIGNED)
    node_facts['kernel_state']['nouveau']['loaded'] = True
    plan = P.driver_plan(node_facts, settings(source='ubuntu'), node=node, stage='installed', check_mode=True,
                         run={'start_version': VERSION, 'installing': False, 'modprobe': {}})
    assert plan['reboot']['needed'] and plan['check_mode_loads'] is True
    assert P.driver_plan(node_facts, settings(source='ubuntu', reboot_ok=False), node=node, stage='installed',
                         check_mode=True, run={'start_version': VERSION, 'installing': False,
                                               'modprobe': {}})['check_mode_loads'] is False
    loaded_facts, loaded_node = signed_node()
    assert P.driver_plan(loaded_facts, settings(source='ubuntu'), node=loaded_node,
                         check_mode=True)['check_mode_loads'] is False


def test_check_mode_modules_of_the_next_kernel_leave_the_extras():
    # Fleet: check mode on an adopted node with a kernel update pending predicted the extras, the real run left them.
    rows = UBUNTU_SIGNED + [('nvidia-fabricmanager-580', VERSION + '-0ubuntu0.24.04.1'),
                            ('libnvidia-nscq-580', VERSION + '-0ubuntu0.24.04.1')]
    node_facts, node = facts(rows, default=K_NEXT, loaded=dict(LOADED), smi=SMI, pci=H100_PCI)
    node['apt_holds'] = ['nvidia-fabricmanager-580', 'libnvidia-nscq-580']
    plan = P.driver_plan(node_facts, settings(source='ubuntu'), node=node, stage='installed', check_mode=True,
                         run={'start_version': VERSION, 'installing': True, 'modprobe': {}})
    assert plan['extras']['missing'] == [] and plan['predict']['extras'] is False


def test_adopted_node_after_the_modules_install_needs_no_driver_reboot():
    # Re-read after apt installed the modules of the next kernel: they stand where DKMS's build stands, and the
    # driver loaded now is the installed one, so the driver role has nothing left (the kernel role reboots).
    rows = UBUNTU_SIGNED + [('linux-modules-nvidia-580-server-open-' + K_NEXT, '6.8.0-62.65+1')]
    node_facts, node = facts(rows, default=K_NEXT, loaded=dict(LOADED), smi=SMI)
    plan = P.driver_plan(node_facts, settings(source='ubuntu'), node=node, stage='installed',
                         run={'start_version': VERSION, 'installing': True, 'modprobe': {}})
    assert plan['ubuntu']['modules_installed'] is True
    assert plan['ok'] is True
    assert plan['reboot']['needed'] is False and plan['blockers'] == []


def test_adopted_node_converged_has_no_work():
    node_facts, node = signed_node()
    plan = P.driver_plan(node_facts, settings(source='ubuntu'), node=node)
    assert plan['ok'] is True and plan['install']['needed'] is False
    assert plan['extras']['missing'] == []
    units = {'nvidia-persistenced.service': {'load': 'loaded', 'active': 'active', 'sub': 'running',
                                             'enabled': 'static'}}
    files = {P.PERSISTENCED_DROPIN.rsplit('/', 1)[0]: {'exists': True, 'type': 'directory', 'mode': '0755',
                                                       'uid': 0, 'gid': 0},
             P.PERSISTENCED_DROPIN: {'exists': True, 'type': 'file', 'mode': '0644', 'uid': 0, 'gid': 0,
                                     'sha1': P._sha1(P.PERSISTENCED_DROPIN_TEXT)},
             P.PERSISTENCED_WANTS: {'exists': True, 'type': 'link',
                                    'target': '/usr/lib/systemd/system/nvidia-persistenced.service'}}
    work = P.driver_work(plan, node_facts, {'blacklist_nouveau': True, 'persistence_conflicts': 'disable',
                                            'expected_gpus': 1}, units, files)
    assert work == []


def test_adopted_node_under_secure_boot_is_not_blocked():
    # Canonical signs the modules: no DKMS key to enrol, so no Secure Boot blocker (R13 is DKMS's).
    mok = {'path': '/var/lib/shim-signed/mok/MOK.der', 'enrolled': False}
    secure = {'enabled': True, 'source': 'mokutil --sb-state', 'dkms_mok': mok}
    node_facts, node = facts(UBUNTU_SIGNED, default=K_NEXT, secure=secure)
    plan = P.driver_plan(node_facts, settings(source='ubuntu'), node=node, stage='installed',
                         run={'start_version': VERSION, 'installing': True, 'modprobe': {}})
    assert plan['blockers'] == []
    dkms_facts, dkms_node = facts([], default=K_NEXT, secure=secure)
    assert P.driver_plan(dkms_facts, settings(), node=dkms_node, stage='installed',
                         run={'start_version': '', 'installing': True, 'modprobe': {}})['blockers']


@pytest.mark.parametrize('version, driver', [
    ('', ['nvidia-headless-no-dkms-580-server-open', 'nvidia-utils-580-server']),
    (VERSION, ['nvidia-headless-no-dkms-580-server-open=580.95.05-*', 'nvidia-utils-580-server=580.95.05-*']),
])
def test_fresh_ubuntu_node_with_source_ubuntu(version, driver):
    node_facts, node = facts([], default=K_NEXT)
    plan = P.driver_plan(node_facts, settings(source='ubuntu', version=version), node=node, check_mode=True)
    assert plan['install']['packages'] == driver + ['linux-modules-nvidia-580-server-open-' + K_NEXT]
    # apt answers check mode from the node's own archive: nothing to predict for a repository to be set up.
    assert plan['predict']['packages'] is False
    assert nvidia_names(plan) == []


def test_proprietary_modules_name():
    node_facts, node = facts([])
    plan = P.driver_plan(node_facts, settings(source='ubuntu', module_type='proprietary'), node=node)
    assert plan['install']['packages'] == ['nvidia-headless-no-dkms-580-server', 'nvidia-utils-580-server',
                                           'linux-modules-nvidia-580-server-' + K_RUN]


# ------------------------------------------------------------------------------------------------ role plan, readiness

ABSENT = {'load': 'not-found', 'active': 'inactive', 'sub': 'dead', 'enabled': ''}
ROLE_UNITS = dict(((u if u.endswith('.service') else u + '.service'), ABSENT) for u in
                  list(D.UNITS) + D.SETTINGS[D.PREFIX + 'persistence_conflicting_units']['default'])
ROLE_UNITS['nvidia-persistenced.service'] = {'load': 'loaded', 'active': 'active', 'sub': 'running',
                                             'enabled': 'static'}


def role_facts(rows, **kw):
    node_facts, node = facts(rows, **kw)
    kernel_state = dict(node_facts['kernel_state'], os=dict(UBUNTU), devel={}, driver_node=node)
    return {'nodeprep_gathered': ['kernel', 'nvidia'], 'kernel_state': kernel_state, 'nvidia': node_facts['nvidia'],
            'distribution': 'Ubuntu', 'distribution_version': '24.04', 'distribution_major_version': '24',
            'os_family': 'Debian', 'architecture': 'x86_64', 'kernel': kw.get('running', K_RUN),
            'nodeprep_units': dict(ROLE_UNITS), 'nodeprep_files': dict((p, {'exists': False}) for p in D.FILES),
            'nodeprep_errors': {}}


def role_plan(ansible_facts, given):
    typed, problems = _plans.typed_settings('nvidia_driver', given)
    return _plans.plan_role('nvidia_driver', ansible_facts, typed, problems,
                            _plan.new_context(host='node1', check_mode=False))


def test_role_plan_refusal_is_a_settings_problem_and_fails_the_driver_checks():
    plan = role_plan(role_facts(UBUNTU_SIGNED, loaded=dict(LOADED), smi=SMI, default=K_NEXT), {})
    assert len(plan['problems']) == 1 and "Ubuntu's Canonical-signed NVIDIA driver" in plan['problems'][0]
    result = _readiness.plan_check('driver.loaded', plan)
    assert result['status'] == 'fail' and "NVIDIA's repository packages" in result['observed']


def test_role_plan_adopts_with_source_ubuntu():
    plan = role_plan(role_facts(UBUNTU_SIGNED, loaded=dict(LOADED), smi=SMI, default=K_NEXT),
                     {'nodeprep_nvidia_driver_source': 'ubuntu'})
    assert plan['problems'] == [] and plan['errors'] == []
    assert plan['args']['install'][0]['name'][-1] == 'linux-modules-nvidia-580-server-open-' + K_NEXT
    # The modules of the kernel that boots next are the role's work: readiness warns until they are there.
    check = _readiness.plan_check('driver.loaded', plan)
    assert check['status'] == 'warn' and 'not built for the kernel that boots next, ' + K_NEXT in check['observed']


# ------------------------------------------------------------------------------------------------ the gather's reader

DPKG_ROWS = ('nvidia-fabricmanager\t580.95.05-1\thi \tamd64\n'
             'libnvidia-nscq\t580.95.05-1\tii \tamd64\n'
             'nvidia-open\t580.95.05-0ubuntu1\tii \tamd64\n'
             'bash\t5.2.21-2ubuntu4\tii \tamd64\n')


def test_the_gather_reads_the_driver_packages_with_one_argv():
    """What the driver plan reads of the node comes from the gather (kernel_state.driver_node, _driver_node's reader:
    one dpkg-query argv under LC_ALL=C); the plan made from it (the nvidia_driver_plan module, which read it itself,
    is gone: its assertions live here)."""
    module = FakeModule({'dpkg-query': '/usr/bin/dpkg-query'}, [(0, DPKG_ROWS, '')])
    node = read_driver_node(module, 'debian')
    assert module.seen == [['/usr/bin/dpkg-query', '-W', '-f',
                            '${Package}\t${Version}\t${db:Status-Abbrev}\t${Architecture}\n']]
    assert node['apt_holds'] == ['nvidia-fabricmanager']
    assert 'bash' not in node['packages']
    kernel = '6.8.0-45-generic'
    node_facts = {'os': UBUNTU, 'services': {},
                  'kernel_state': {'running': kernel, 'default': kernel, 'nouveau': {'loaded': False},
                                   'nvidia_module': {'loaded': True, 'version': '580.95.05', 'flavour': 'open'},
                                   'dkms': [{'module': 'nvidia', 'version': '580.95.05', 'kernel': kernel,
                                             'status': 'installed'}],
                                   'pci': {'nvswitch_fabric': 'pci', 'nvswitch_count': 4}},
                  'nvidia': {'present': True, 'driver_version': '580.95.05', 'gpus': []}}
    plan = P.driver_plan(node_facts, {'branch': '580'}, node=node)
    assert plan['ok'] is True
    # apt: persistenced at the driver's version too (R21), any Debian release of it
    assert plan['extras']['missing'] == ['nvidia-persistenced=580.95.05-*']
    assert plan['extras']['hold'] == ['nvidia-fabricmanager', 'libnvidia-nscq']


# ------------------------------------------------------------------------------------- Ubuntu's DKMS flavour (issue 30)

# Ubuntu's archive, DKMS flavour: what ubuntu-drivers installs where no module package exists for the kernel
# (canonical/ubuntu-drivers-common detect.py falls back to nvidia-dkms-<flavour>).  Versions of Ubuntu's updates
# carry the release (570.211.01-0ubuntu1.24.04.1: canonical/core-base PR 439); NVIDIA's repository the same names at
# <V>-0ubuntu1 (570.133.20-0ubuntu1 in public install transcripts).
U570 = '570.211.01-0ubuntu1.24.04.1'
UBUNTU_DKMS = [('nvidia-driver-570-open', U570), ('nvidia-dkms-570-open', U570), ('nvidia-kernel-common-570', U570),
               ('libnvidia-compute-570', U570)]
NVIDIA_570 = [('nvidia-open', '570.133.20-0ubuntu1'), ('nvidia-driver-570-open', '570.133.20-0ubuntu1'),
              ('nvidia-dkms-570-open', '570.133.20-0ubuntu1')]
# The -server series through nvidia-driver-580-server-open, which pulls Ubuntu's DKMS package (NVIDIA/gpu-driver-
# container commit 8a29f61 purged it again), beside the signed modules.
SERVER_DKMS = UBUNTU_SIGNED + [('nvidia-dkms-580-server-open', UBU_V)]


@pytest.mark.parametrize('name, rows, kind, dkms', [
    ("Ubuntu's desktop DKMS driver", UBUNTU_DKMS, 'ubuntu-dkms', ['nvidia-dkms-570-open', 'nvidia-driver-570-open']),
    ("the same names from NVIDIA's repository", NVIDIA_570, 'nvidia', []),
    ("Ubuntu's -server driver with its DKMS package", SERVER_DKMS, 'ubuntu-dkms', ['nvidia-dkms-580-server-open']),
    ("Ubuntu's 590 keeps the branch in the name (NVIDIA's has none)", [('nvidia-dkms-590-open', '590.48.01-0ubuntu1')],
     'ubuntu-dkms', ['nvidia-dkms-590-open']),
    ("Ubuntu's signed driver, no DKMS", UBUNTU_SIGNED, 'ubuntu', []),
])
def test_ubuntu_dkms_flavour_is_told_from_nvidia_s(name, rows, kind, dkms):
    found = U.flavour(dpkg(*rows))
    assert (found['flavour'], found['dkms_packages']) == (kind, dkms), name


@pytest.mark.parametrize('source', ['nvidia', 'ubuntu'])
def test_ubuntu_dkms_flavour_is_refused_naming_both_flavours(source):
    """Before: read as NVIDIA's repository driver, and nvidia-open installed over it (source nvidia)."""
    node_facts, node = facts(UBUNTU_DKMS, loaded=dict(LOADED, version='570.211.01'),
                             smi=dict(SMI, driver_version='570.211.01'))
    plan = P.driver_plan(node_facts, settings(source=source, branch='570'), node=node)
    assert list(plan['refused']) == ['flavour'] and 'install' not in plan
    msg = plan['refused']['flavour']
    for part in ("Ubuntu's DKMS-built NVIDIA driver from Ubuntu's archive (installed: nvidia-dkms-570-open, "
                 'nvidia-driver-570-open)', 'nodeprep_nvidia_driver_source=' + source + ' would install',
                 'nodeprep_nvidia_driver_source=nvidia: nvidia-open with nvidia-dkms-open',
                 'nodeprep_nvidia_driver_source=ubuntu: nvidia-headless-no-dkms-570-server-open with '
                 'linux-modules-nvidia-570-server-open-<kernel>', 'apt-get purge nvidia-dkms-570-open '
                 'nvidia-driver-570-open'):
        assert part in msg, part


def test_role_plan_refuses_the_ubuntu_dkms_flavour_before_any_change():
    plan = role_plan(role_facts(UBUNTU_DKMS, loaded=dict(LOADED, version='570.211.01')),
                     {'nodeprep_nvidia_driver_branch': '570'})
    assert len(plan['problems']) == 1 and "Ubuntu's DKMS-built NVIDIA driver" in plan['problems'][0]
    assert plan['args'].get('install') in (None, [])


# ------------------------------------------------------------------------------------- module meta package, archive

def test_flavour_meta_package_follows_the_installed_kernel_flavour():
    """linux-image-generic installed -> linux-modules-nvidia-580-server-open-generic (ubuntu-drivers' naming:
    canonical/ubuntu-drivers-common detect.py get_linux_modules_metapackage); virtual counts as generic."""
    kernel_packages = {'linux-image-generic-hwe-24.04': ['6.11.0-29.29~24.04.1'], 'linux-image-virtual': ['1'],
                       'linux-image-' + K_RUN: ['6.8.0-60.63'], 'linux-image-unsigned-' + K_RUN: ['1']}
    candidates = {SIGNED_PREFIX + 'generic': '6.8.0-60.63+1', SIGNED_PREFIX + 'generic-hwe-24.04': None}
    assert U.flavour_metas(settings(), kernel_packages, candidates, {}) == [
        {'name': SIGNED_PREFIX + 'generic', 'installed': False, 'available': True},
        {'name': SIGNED_PREFIX + 'generic-hwe-24.04', 'installed': False, 'available': False}]
    assert U.flavour_metas(settings(), kernel_packages, None, {})[0]['available'] is None


SIGNED_PREFIX = 'linux-modules-nvidia-580-server-open-'


def meta_facts(candidates, rows=None):
    node_facts, node = signed_node(pci=NO_SWITCH_PCI)
    node_facts['kernel_state']['packages'] = {'linux-image-generic': ['6.8.0-60.63'],
                                              'linux-image-' + K_RUN: ['6.8.0-60.63']}
    node['packages'] = dpkg(*(rows or [r for r in UBUNTU_SIGNED if not r[0].endswith('-generic')]))
    node['apt_candidates'] = candidates
    return node_facts, node


def test_the_meta_package_is_an_extra_of_the_driver():
    """Only the per-kernel package was installed: kernels installed outside the collection (apt upgrade of
    linux-generic) came without their modules."""
    node_facts, node = meta_facts({SIGNED_PREFIX + K_RUN: '6.8.0-60.63+1', SIGNED_PREFIX + 'generic': '6.8.0-60.63+1'})
    plan = P.driver_plan(node_facts, settings(source='ubuntu'), node=node)
    assert SIGNED_PREFIX + 'generic' in plan['extras']['packages']
    assert plan['extras']['missing'] == [SIGNED_PREFIX + 'generic'] and plan['extras']['needed'] is True
    assert P.work_items(plan, node_facts, {'blacklist_nouveau': True})[0] == (
        P.LOADED, 'fail', 'extras: ' + SIGNED_PREFIX + 'generic')
    # Installed: nothing more; no candidate: a warning, nothing to install.
    node_facts, node = meta_facts({SIGNED_PREFIX + 'generic': '6.8.0-60.63+1'}, UBUNTU_SIGNED)
    assert P.driver_plan(node_facts, settings(source='ubuntu'), node=node)['extras']['missing'] == []
    node_facts, node = meta_facts({SIGNED_PREFIX + 'generic': None})
    plan = P.driver_plan(node_facts, settings(source='ubuntu'), node=node)
    assert plan['extras']['missing'] == [] and ("Ubuntu's archive has no " + SIGNED_PREFIX + 'generic') in \
        plan['warnings'][0]


def test_signed_modules_the_archive_lacks_for_the_boot_kernel_stop_the_driver_role():
    node_facts, node = facts([], default=K_NEXT)
    node['apt_candidates'] = {SIGNED_PREFIX + K_NEXT: None}
    plan = P.driver_plan(node_facts, settings(source='ubuntu'), node=node)
    assert list(plan['refused']) == ['modules']
    assert plan['refused']['modules'].startswith("nvidia_driver on this node: Ubuntu's Canonical-signed NVIDIA "
                                                 'modules are not installed for ' + K_NEXT)
    role = role_plan(role_facts([], default=K_NEXT), {'nodeprep_nvidia_driver_source': 'ubuntu'})
    assert role['errors'] == [] and role['problems'] == []
    gathered = role_facts([], default=K_NEXT)
    gathered['kernel_state']['driver_node']['apt_candidates'] = {SIGNED_PREFIX + K_NEXT: None}
    role = role_plan(gathered, {'nodeprep_nvidia_driver_source': 'ubuntu'})
    assert len(role['errors']) == 1 and role['problems'] == [] and SIGNED_PREFIX + K_NEXT in role['errors'][0]


@pytest.mark.parametrize('packages, kernels, flavours, names', [
    ({}, [K_RUN], ['generic'], []),
    (dpkg(*UBUNTU_SIGNED), [K_RUN, K_NEXT, None], ['generic'],
     [SIGNED_PREFIX + K_RUN, SIGNED_PREFIX + K_NEXT, SIGNED_PREFIX + 'generic']),
])
def test_the_gather_asks_apt_for_the_module_packages_of_each_kernel(packages, kernels, flavours, names):
    assert _driver_packages.modules_queries(packages, kernels, flavours) == names

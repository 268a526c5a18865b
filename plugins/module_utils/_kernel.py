# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the gpufleet.nodeprep collection.
# Its functions may change without notice; do not import it from other collections.
"""Kernel, boot loader, nouveau, NVIDIA module, DKMS and PCI state.

The parsers are pure functions (no Ansible import).  ``collect_kernel_facts`` reads files
below ``root`` (so a tree can stand in for a host) and runs grubby, modinfo, dkms and
lsinitrd/lsinitramfs through the collection's runner (_runner.run_status) when it looks at the real host.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import glob
import os
import re

from ansible_collections.gpufleet.nodeprep.plugins.module_utils._dkms import NVIDIA_MODULES, make_log_path
from ansible_collections.gpufleet.nodeprep.plugins.module_utils._driver_node import DriverNodeError, read_driver_node
from ansible_collections.gpufleet.nodeprep.plugins.module_utils._driver_plan import family_of
from ansible_collections.gpufleet.nodeprep.plugins.module_utils._runner import run_status
from ansible_collections.gpufleet.nodeprep.plugins.module_utils._rdma import collect_rdma_facts


class KernelError(Exception):
    """Kernel related output or files that cannot be understood."""


NVIDIA_VENDOR = '0x10de'
GPU_CLASSES = ('0x0300', '0x0302')
NVSWITCH_CLASS = '0x0680'
# VPD model field of the ConnectX-7 functions that bridge to the NVSwitch trays of NVLink 5 boards (HGX B200/B300).
# Source: NVIDIA/gpu-driver-container rhel9/nvidia-driver (_assert_nvlink5_system), siderolabs/extensions nvswitch.go.
NVLINK5_VPD_MARK = b'SW_MNG'
SECURE_BOOT_EFIVAR = 'sys/firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c'
# Where DKMS keeps the key it signs modules with: dkms 3.x (EL, Debian 13, Ubuntu 24.04+), then shim-signed (Ubuntu).
DKMS_MOK_KEYS = ('var/lib/dkms/mok.pub', 'var/lib/shim-signed/mok/MOK.der')
MODPROBE_DIRS = ('etc/modprobe.d', 'run/modprobe.d', 'usr/local/lib/modprobe.d', 'usr/lib/modprobe.d',
                 'lib/modprobe.d')
KERNEL_IMAGES = ('boot/vmlinuz-{0}', 'boot/vmlinux-{0}', 'boot/Image-{0}', 'lib/modules/{0}/vmlinuz')


def version_key(release):
    """Sort key comparing numeric runs as numbers (5.14.0-570 > 5.14.0-427)."""
    return [(0, int(part), '') if part.isdigit() else (1, 0, part) for part in re.findall(r'\d+|[^\d]+', release)]


# ---------------------------------------------------------------- NVIDIA module

def parse_nvidia_version_file(text):
    """Parse /proc/driver/nvidia/version: {'version', 'flavour'}."""
    first = text.splitlines()[0] if text.strip() else ''
    if not first.startswith('NVRM version:'):
        raise KernelError("/proc/driver/nvidia/version: first line '{0}' does not start with 'NVRM version:'".format(
            first))
    match = re.search(r'\s(\d+\.\d+(?:\.\d+)*)\s', first + ' ')
    if not match:
        raise KernelError("/proc/driver/nvidia/version: no driver version in '{0}'".format(first))
    flavour = 'open' if 'Open Kernel Module' in first else 'proprietary'
    return {'version': match.group(1), 'flavour': flavour}


def license_flavour(license_text):
    """Flavour from ``modinfo -F license nvidia``: 'Dual MIT/GPL' is open, 'NVIDIA' proprietary."""
    value = license_text.strip().splitlines()[0].strip() if license_text.strip() else ''
    if value == 'Dual MIT/GPL':
        return 'open'
    if value == 'NVIDIA':
        return 'proprietary'
    raise KernelError("modinfo -F license nvidia printed '{0}' (expected 'Dual MIT/GPL' or 'NVIDIA')".format(value))


def parse_proc_modules(text):
    """Names of the modules in /proc/modules."""
    return [line.split(' ', 1)[0] for line in text.splitlines() if line.strip()]


# ---------------------------------------------------------------- DKMS

_DKMS_RE = re.compile(r'^(?P<head>[^:]+?)\s*:\s*(?P<status>.+?)\s*$')


def parse_dkms_status(text):
    """Parse ``dkms status`` in its old (``name, ver, kernel, arch: state``) and new (``name/ver, ...``) forms."""
    result = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        if line.startswith(('Error!', 'Warning:', 'WARNING:')) or line.startswith(' '):
            continue
        match = _DKMS_RE.match(line)
        if not match:
            raise KernelError("dkms status line {0}: cannot parse '{1}'".format(lineno, line))
        parts = [p.strip() for p in match.group('head').split(',')]
        if '/' in parts[0]:
            module, version = parts[0].split('/', 1)
            rest = parts[1:]
        else:
            if len(parts) < 2:
                raise KernelError("dkms status line {0}: no module version in '{1}'".format(lineno, line))
            module, version = parts[0], parts[1]
            rest = parts[2:]
        if len(rest) not in (0, 2):
            raise KernelError("dkms status line {0}: expected 'kernel, arch' after the version in '{1}'".format(
                lineno, line))
        status = match.group('status')
        result.append({'module': module, 'version': version,
                       'kernel': rest[0] if rest else None, 'arch': rest[1] if rest else None,
                       'status': status.split(' ', 1)[0].rstrip(','), 'detail': status})
    return result


# ---------------------------------------------------------------- nouveau

def parse_modprobe_conf(text, module='nouveau'):
    """Return the lines of a modprobe.d file that keep ``module`` from loading: [(lineno, line)]."""
    found = []
    joined = []
    for lineno, raw in enumerate(text.splitlines(), 1):
        joined.append((lineno, raw))
    for lineno, raw in joined:
        line = raw.strip()
        if not line or line.startswith('#'):
            continue
        words = line.split()
        if words[0] == 'blacklist' and len(words) >= 2 and words[1] == module:
            found.append((lineno, line))
        elif words[0] == 'install' and len(words) >= 3 and words[1] == module and \
                os.path.basename(words[2]) in ('false', 'true'):
            found.append((lineno, line))
    return found


def cmdline_blacklist(cmdline, module='nouveau'):
    """Kernel command line parameters that blacklist ``module`` (modprobe.blacklist=, rd.driver.blacklist=)."""
    hits = []
    for word in cmdline.split():
        key, _sep, value = word.partition('=')
        if key in ('modprobe.blacklist', 'module_blacklist', 'rd.driver.blacklist') and \
                module in value.split(','):
            hits.append(word)
    return hits


def modprobe_files(root='/'):
    """*.conf of the modprobe.d directories; a name in an earlier directory hides later ones (kmod)."""
    chosen = {}
    for base in MODPROBE_DIRS:
        for path in glob.glob(os.path.join(root, base, '*.conf')):
            chosen.setdefault(os.path.basename(path), path)
    return [chosen[name] for name in sorted(chosen)]


# ---------------------------------------------------------------- PCI

def _read_attr(path):
    try:
        with open(path) as handle:
            return handle.read().strip().lower()
    except (IOError, OSError):
        return None


def scan_pci(root='/'):
    """NVIDIA GPUs and NVSwitches from sysfs, without lspci."""
    gpus = []
    switches = []
    for dev in sorted(glob.glob(os.path.join(root, 'sys/bus/pci/devices/*'))):
        vendor = _read_attr(os.path.join(dev, 'vendor'))
        if vendor != NVIDIA_VENDOR:
            continue
        pci_class = _read_attr(os.path.join(dev, 'class')) or ''
        info = {'bus_id': os.path.basename(dev), 'device_id': _read_attr(os.path.join(dev, 'device')),
                'vendor_id': vendor, 'class': pci_class}
        if pci_class[:6] in GPU_CLASSES:
            gpus.append(info)
        elif pci_class[:6] == NVSWITCH_CLASS:
            switches.append(info)
    bridges = scan_nvlink5_bridges(root)
    return {'gpus': gpus, 'gpu_count': len(gpus), 'nvswitches': switches, 'nvswitch_count': len(switches),
            'nvlink5_bridges': bridges, 'nvlink5_bridge_count': len(bridges),
            'nvswitch_fabric': nvswitch_fabric(len(switches), len(bridges))}


def nvswitch_fabric(nvswitch_count, nvlink5_bridge_count):
    """How the NVSwitches show: 'nvlink5' (IB bridges, B200 and newer), 'pci' (NVIDIA PCI bridges, Hopper), 'none'."""
    if nvlink5_bridge_count:
        return 'nvlink5'
    if nvswitch_count:
        return 'pci'
    return 'none'


def vpd_is_switch_bridge(vpd):
    """True when a PCI VPD blob names the NVSwitch management function (``SW_MNG``)."""
    return NVLINK5_VPD_MARK in (vpd or b'')


def scan_nvlink5_bridges(root='/'):
    """NVLink 5 switch bridges: InfiniBand devices whose PCI VPD holds SW_MNG (R2).

    Ordinary ConnectX-7 NICs share the PCI device id (15b3:1021) but not the VPD field.
    """
    bridges = []
    for ib_dir in sorted(glob.glob(os.path.join(root, 'sys/class/infiniband/*'))):
        name = os.path.basename(ib_dir)
        rel = os.path.join('sys/class/infiniband', name, 'device')
        device = resolve_in_root(root, rel) if root not in ('/', '') else (
            os.path.realpath(os.path.join('/', rel)) if os.path.exists(os.path.join('/', rel)) else None)
        if device is None:
            continue
        try:
            with open(os.path.join(device, 'vpd'), 'rb') as handle:
                vpd = handle.read(65536)
        except (IOError, OSError):
            continue
        if vpd_is_switch_bridge(vpd):
            bridges.append({'ib_device': name, 'bus_id': os.path.basename(device),
                            'device_id': _read_attr(os.path.join(device, 'device'))})
    return bridges


# ---------------------------------------------------------------- boot loader

def parse_grubenv(text):
    """GRUB environment block: {name: value}."""
    env = {}
    for line in text.splitlines():
        if line.startswith('#') or '=' not in line:
            continue
        key, value = line.split('=', 1)
        env[key] = value
    return env


_MENU_RE = re.compile(r'^\s*(menuentry|submenu)\s+(\'[^\']*\'|"[^"]*"|\S+)(.*?)\{\s*$')
_ID_RE = re.compile(r'\$menuentry_id_option\s+(\'[^\']*\'|"[^"]*"|\S+)')
_LINUX_RE = re.compile(r'^\s*linux(?:efi|16)?\s+(\S+)')
_DEFAULT_RE = re.compile(r'^\s*set\s+default=(\'[^\']*\'|"[^"]*"|\S+)')


def _unquote(word):
    if len(word) >= 2 and word[0] == word[-1] and word[0] in '\'"':
        return word[1:-1]
    return word


def release_from_image(path):
    """'/boot/vmlinuz-6.1.0-18-amd64' -> '6.1.0-18-amd64'."""
    name = os.path.basename(path.strip())
    for prefix in ('vmlinuz-', 'vmlinux-', 'Image-', 'kernel-'):
        if name.startswith(prefix):
            return name[len(prefix):]
    return None


def parse_grub_cfg(text):
    """Return {'entries': tree of {title, id, release, children}, 'defaults': [raw values of set default=]}."""
    root = {'title': None, 'id': None, 'release': None, 'children': []}
    stack = [root]
    defaults = []
    for line in text.splitlines():
        match = _MENU_RE.match(line)
        if match:
            ident = _ID_RE.search(match.group(3))
            node = {'kind': match.group(1), 'title': _unquote(match.group(2)),
                    'id': _unquote(ident.group(1)) if ident else None, 'release': None, 'children': []}
            stack[-1]['children'].append(node)
            stack.append(node)
            continue
        if line.strip() == '}' and len(stack) > 1:
            stack.pop()
            continue
        linux = _LINUX_RE.match(line)
        if linux and len(stack) > 1:
            stack[-1]['release'] = release_from_image(linux.group(1))
            continue
        default = _DEFAULT_RE.match(line)
        if default:
            defaults.append(_unquote(default.group(1)))
    return {'entries': root['children'], 'defaults': defaults}


def resolve_grub_default(cfg, env):
    """Release GRUB boots next from a parsed grub.cfg and grubenv (next_entry, then default/saved_entry)."""
    value = None
    if env.get('next_entry') and any('next_entry' in d for d in cfg['defaults']):
        value = env['next_entry']
    else:
        for raw in cfg['defaults']:
            if 'next_entry' in raw:
                continue
            value = raw
        if value is not None and value.startswith('${') and value.endswith('}'):
            value = env.get(value[2:-1], '')
        if value is None or value == '':
            value = '0'
    return _walk_grub(cfg['entries'], value)


def _walk_grub(entries, value):
    nodes = entries
    node = None
    for part in value.split('>'):
        node = None
        if part.isdigit():
            index = int(part)
            if index < len(nodes):
                node = nodes[index]
        else:
            for candidate in nodes:
                if part in (candidate['title'], candidate['id']):
                    node = candidate
                    break
        if node is None:
            return None
        nodes = node['children']
    if node is None:
        return None
    if node.get('kind') == 'submenu':
        return _walk_grub(node['children'], '0')
    return node['release']


def parse_bls_entry(text):
    """Boot Loader Specification entry: the release of its ``linux`` line (or its ``version``)."""
    version = None
    for line in text.splitlines():
        words = line.split(None, 1)
        if len(words) == 2 and words[0] == 'linux':
            release = release_from_image(words[1])
            if release:
                return release
        if len(words) == 2 and words[0] == 'version':
            version = words[1].strip()
    return version


def bls_default(root, env):
    """Default of a BLS (EL8+) host: grubenv saved_entry names /boot/loader/entries/<id>.conf, else the newest."""
    entries_dir = os.path.join(root, 'boot/loader/entries')
    saved = env.get('saved_entry')
    if saved:
        path = os.path.join(entries_dir, saved + '.conf')
        if os.path.exists(path):
            with open(path) as handle:
                return parse_bls_entry(handle.read())
    releases = []
    for path in glob.glob(os.path.join(entries_dir, '*.conf')):
        with open(path) as handle:
            release = parse_bls_entry(handle.read())
        if release and not release.endswith('rescue') and 'rescue' not in os.path.basename(path):
            releases.append(release)
    if not releases:
        return None
    return sorted(releases, key=version_key)[-1]


# ---------------------------------------------------------------- tree helpers

def resolve_in_root(root, path, depth=0):
    """Follow symlinks in path as if root were /; return the real path or None when it does not resolve."""
    if depth > 40:
        return None
    parts = [p for p in path.split('/') if p]
    current = root
    for index, part in enumerate(parts):
        candidate = os.path.join(current, part)
        if os.path.islink(candidate):
            target = os.readlink(candidate)
            rest = '/'.join(parts[index + 1:])
            if target.startswith('/'):
                new = target
            else:
                new = os.path.join(current[len(root.rstrip('/')):] or '/', target)
            return resolve_in_root(root, os.path.normpath(os.path.join(new, rest)), depth + 1)
        if not os.path.exists(candidate):
            return None
        current = candidate
    return current


def _read(path):
    with open(path, 'rb') as handle:
        return handle.read().decode('utf-8', 'replace')


def _try_read(path):
    try:
        return _read(path)
    except (IOError, OSError):
        return None


# ---------------------------------------------------------------- OS identity

# os-release ID -> (Ansible's distribution name, os_family), for the platforms the roles support.  Other IDs give no
# identity, and the roles then ask Ansible's setup module as before.
OS_IDS = {
    'rhel': ('RedHat', 'RedHat'), 'rocky': ('Rocky', 'RedHat'), 'almalinux': ('AlmaLinux', 'RedHat'),
    'centos': ('CentOS', 'RedHat'), 'ol': ('OracleLinux', 'RedHat'),
    'ubuntu': ('Ubuntu', 'Debian'), 'debian': ('Debian', 'Debian'),
}


def parse_os_release(text):
    """{KEY: value} of an os-release file (quotes removed)."""
    out = {}
    for line in (text or '').splitlines():
        line = line.strip()
        if not line or line.startswith('#') or '=' not in line:
            continue
        key, value = line.split('=', 1)
        value = value.strip()
        if len(value) >= 2 and value[0] == value[-1] and value[0] in '"\'':
            value = value[1:-1]
        out[key.strip()] = value
    return out


def os_identity(os_release_text, debian_version_text=None, machine=None):
    """The OS facts the roles read, named as Ansible's setup names them (os_family, distribution,
    distribution_version, distribution_major_version, architecture), from /etc/os-release (and /etc/debian_version
    on Debian, where Ansible takes the point release from it).  None when the ID is not one the roles support."""
    fields = parse_os_release(os_release_text)
    known = OS_IDS.get(fields.get('ID', '').lower())
    version = fields.get('VERSION_ID', '')
    if known is None or not version:
        return None
    if known[0] == 'Debian' and re.match(r'^\d+(\.\d+)*$', (debian_version_text or '').strip()):
        version = debian_version_text.strip()
    return {'os_family': known[1], 'distribution': known[0], 'distribution_version': version,
            'distribution_major_version': version.split('.')[0], 'architecture': machine or None}


# ---------------------------------------------------------------- collector

def installed_kernels(root='/'):
    """Releases with a kernel image in /boot or /lib/modules, and every /lib/modules directory."""
    found = set()
    for pattern in KERNEL_IMAGES:
        for path in glob.glob(os.path.join(root, pattern.format('*'))):
            if pattern.startswith('lib/'):
                found.add(os.path.basename(os.path.dirname(path)))
            else:
                release = release_from_image(path)
                if release and not release.endswith('.hmac') and 'rescue' not in release:
                    found.add(release)
    module_dirs = [os.path.basename(p) for p in glob.glob(os.path.join(root, 'lib/modules/*')) if os.path.isdir(p)]
    return sorted(found, key=version_key), sorted(module_dirs, key=version_key)


def _running_release(root):
    if root == '/':
        return os.uname()[2]
    text = _try_read(os.path.join(root, 'proc/sys/kernel/osrelease'))
    if text and text.strip():
        return text.strip()
    raise KernelError('root={0}: proc/sys/kernel/osrelease is empty, so its running kernel cannot be told'.format(root))


def _default_kernel(module, root, warnings):
    if root == '/':
        grubby = module.get_bin_path('grubby')
        if grubby:
            argv = [grubby, '--default-kernel']
            rc, out, err = run_status(module, argv)
            if rc == 0 and out.strip():
                return release_from_image(out.strip().splitlines()[-1]), 'grubby'
            warnings.append('grubby --default-kernel failed (rc={0}): {1}'.format(rc, (err or out).strip()))
    for cfg_rel, env_rel in (('boot/grub/grub.cfg', 'boot/grub/grubenv'),
                             ('boot/grub2/grub.cfg', 'boot/grub2/grubenv'),
                             ('boot/efi/EFI/redhat/grub.cfg', 'boot/grub2/grubenv')):
        cfg_text = _try_read(os.path.join(root, cfg_rel))
        if cfg_text is None:
            continue
        env = parse_grubenv(_try_read(os.path.join(root, env_rel)) or '')
        if 'blscfg' in cfg_text:
            return bls_default(root, env), 'bls:' + cfg_rel
        return resolve_grub_default(parse_grub_cfg(cfg_text), env), cfg_rel
    if os.path.isdir(os.path.join(root, 'boot/loader/entries')):
        env = parse_grubenv(_try_read(os.path.join(root, 'boot/grub2/grubenv')) or '')
        return bls_default(root, env), 'bls'
    return None, None


def _nouveau(module, root, running, check_initramfs, warnings):
    modules_text = _try_read(os.path.join(root, 'proc/modules')) or ''
    loaded = 'nouveau' in parse_proc_modules(modules_text) or os.path.isdir(os.path.join(root, 'sys/module/nouveau'))
    files = []
    lines = []
    for path in modprobe_files(root):
        text = _try_read(path)
        if text is None:
            continue
        hits = parse_modprobe_conf(text)
        if hits:
            files.append(path)
            lines.extend('{0}:{1}: {2}'.format(path, n, line) for n, line in hits)
    cmdline = cmdline_blacklist(_try_read(os.path.join(root, 'proc/cmdline')) or '')
    result = {'loaded': loaded, 'blacklisted': bool(files or cmdline), 'blacklist_files': files,
              'blacklist_lines': lines, 'cmdline': cmdline, 'initramfs': None}
    if check_initramfs:
        result['initramfs'] = _initramfs(module, root, running, warnings)
    return result


def _initramfs(module, root, release, warnings):
    if root != '/':
        return {'image': None, 'checked': False, 'reason': 'root is not /', 'module_present': None,
                'blacklist_files': []}
    candidates = ['/boot/initramfs-{0}.img'.format(release), '/boot/initrd.img-{0}'.format(release)]
    image = next((c for c in candidates if os.path.exists(c)), None)
    tool = module.get_bin_path('lsinitrd') or module.get_bin_path('lsinitramfs')
    if image is None or tool is None:
        return {'image': image, 'checked': False, 'module_present': None, 'blacklist_files': [],
                'reason': 'no initramfs image for {0}'.format(release) if image is None
                else 'neither lsinitrd nor lsinitramfs is installed'}
    argv = [tool, image]
    rc, out, err = run_status(module, argv)
    if rc != 0:
        warnings.append('{0} failed (rc={1}): {2}'.format(' '.join(argv), rc, err.strip()))
        return {'image': image, 'checked': False, 'module_present': None, 'blacklist_files': [],
                'reason': err.strip()}
    names = [line.split()[-1] for line in out.splitlines() if line.strip()]
    present = any(re.search(r'/nouveau\.ko(\.[a-z]+)?$', n) for n in names)
    conf = [n for n in names if re.search(r'modprobe\.d/[^/]+\.conf$', n)]
    return {'image': image, 'checked': True, 'module_present': present, 'blacklist_files': conf, 'reason': None}


def _nvidia(module, root, running, warnings):
    modules_text = _try_read(os.path.join(root, 'proc/modules')) or ''
    loaded = 'nvidia' in parse_proc_modules(modules_text)
    result = {'loaded': loaded, 'version': None, 'flavour': None, 'source': None}
    version_text = _try_read(os.path.join(root, 'proc/driver/nvidia/version'))
    if version_text:
        parsed = parse_nvidia_version_file(version_text)
        result.update(parsed)
        result['loaded'] = True
        result['source'] = '/proc/driver/nvidia/version'
        return result
    sys_version = _try_read(os.path.join(root, 'sys/module/nvidia/version'))
    if sys_version and sys_version.strip():
        result['version'] = sys_version.strip()
        result['loaded'] = True
        result['source'] = '/sys/module/nvidia/version'
    modinfo = module.get_bin_path('modinfo')
    if modinfo is None:
        return result
    base = [modinfo] + (['-b', root, '-k', running] if root != '/' else [])
    rc, out, err = run_status(module, base + ['-F', 'license', 'nvidia'])
    if rc != 0:
        if 'not found' not in err:
            warnings.append('modinfo -F license nvidia failed (rc={0}): {1}'.format(rc, err.strip()))
        return result
    try:
        result['flavour'] = license_flavour(out)
    except KernelError as exc:
        warnings.append(str(exc))
        return result
    if result['version'] is None:
        rc, out, err = run_status(module, base + ['-F', 'version', 'nvidia'])
        if rc == 0 and out.strip():
            result['version'] = out.strip().splitlines()[0]
    result['source'] = result['source'] or 'modinfo'
    return result


def dkms_tree_status(root):
    """DKMS state read from <root>/var/lib/dkms (what ``dkms status`` reports, for a tree).

    <module>/<version>/<kernel>/<arch>/module/*.ko* is 'built'; 'installed' when those files
    also sit below <root>/lib/modules/<kernel>; a version with no kernel build is 'added'.
    """
    result = []
    base = os.path.join(root, 'var/lib/dkms')
    for mod_dir in sorted(glob.glob(os.path.join(base, '*'))):
        module_name = os.path.basename(mod_dir)
        for ver_dir in sorted(glob.glob(os.path.join(mod_dir, '*')), key=version_key):
            if os.path.islink(ver_dir) or not os.path.isdir(ver_dir):
                continue
            version = os.path.basename(ver_dir)
            builds = glob.glob(os.path.join(ver_dir, '*', '*', 'module'))
            if not builds:
                result.append({'module': module_name, 'version': version, 'kernel': None, 'arch': None,
                               'status': 'added', 'detail': 'added'})
                continue
            for build in sorted(builds):
                arch_dir = os.path.dirname(build)
                kernel = os.path.basename(os.path.dirname(arch_dir))
                kos = [os.path.basename(k) for k in glob.glob(os.path.join(build, '*.ko*'))]
                installed = set()
                for dirpath, _dirs, files in os.walk(os.path.join(root, 'lib/modules', kernel)):
                    installed.update(f for f in files if f in kos)
                status = 'installed' if kos and set(kos) <= installed else 'built'
                result.append({'module': module_name, 'version': version, 'kernel': kernel,
                               'arch': os.path.basename(arch_dir), 'status': status, 'detail': status})
    return result


def _dkms(module, root, warnings):
    if root != '/':
        return dkms_tree_status(root)
    dkms = module.get_bin_path('dkms')
    if dkms is None:
        return []
    argv = [dkms, 'status']
    rc, out, err = run_status(module, argv)
    if rc != 0:
        warnings.append('dkms status failed (rc={0}): {1}'.format(rc, err.strip()))
        return []
    return parse_dkms_status(out)


def dkms_logs(root, entries, modules=NVIDIA_MODULES, limit=65536):
    """{'module/version': text} of the make.log a failed build of an NVIDIA DKMS module left
    (<root>/var/lib/dkms/<module>/<version>/build/make.log, _dkms.MAKE_LOG; its last ``limit`` bytes)."""
    out = {}
    for entry in entries or []:
        name = '{0}/{1}'.format(entry.get('module'), entry.get('version'))
        if entry.get('module') not in modules or name in out:
            continue
        path = os.path.join(root, make_log_path(entry['module'], entry['version']).lstrip('/'))
        try:
            with open(path, 'rb') as handle:
                handle.seek(0, os.SEEK_END)
                size = handle.tell()
                handle.seek(max(0, size - limit))
                data = handle.read()
        except (IOError, OSError):
            continue
        text = data.decode('utf-8', 'replace')
        if size > limit:
            # Keep the make.log's first line (it names the kernel) with its tail.
            try:
                with open(path, 'rb') as handle:
                    text = handle.readline().decode('utf-8', 'replace') + text.split('\n', 1)[-1]
            except (IOError, OSError):
                pass
        out[name] = text
    return out


def parse_sb_state(text):
    """``mokutil --sb-state`` -> True, False or None (EFI variables not supported, or unknown text)."""
    for line in text.splitlines():
        line = line.strip()
        if line.lower() == 'secureboot enabled':
            return True
        if line.lower() == 'secureboot disabled':
            return False
    return None


def parse_efi_secure_boot(data):
    """The SecureBoot EFI variable as read from efivarfs: 4 attribute bytes, then 1 (on) or 0 (off)."""
    if data is None or len(data) < 5:
        return None
    return bytearray(data)[4] == 1


def parse_mok_test_key(text):
    """``mokutil --test-key <key>`` -> True (enrolled), False (not enrolled), None (cannot tell)."""
    if 'is already enrolled' in text:
        return True
    if 'is not enrolled' in text:
        return False
    return None


def _secure_boot(module, root, warnings):
    """{enabled: true|false|null, source, dkms_mok: {path, enrolled}}; read-only, never fails."""
    result = {'enabled': None, 'source': None, 'dkms_mok': {'path': None, 'enrolled': None}}
    mokutil = module.get_bin_path('mokutil') if root == '/' else None
    if mokutil:
        rc, out, err = run_status(module, [mokutil, '--sb-state'])
        state = parse_sb_state(out + '\n' + err)
        if state is not None:
            result['enabled'] = state
            result['source'] = 'mokutil --sb-state'
    if result['enabled'] is None:
        try:
            with open(os.path.join(root, SECURE_BOOT_EFIVAR), 'rb') as handle:
                data = handle.read(64)
        except (IOError, OSError):
            data = None
        state = parse_efi_secure_boot(data)
        if state is not None:
            result['enabled'] = state
            result['source'] = '/' + SECURE_BOOT_EFIVAR
        elif not os.path.isdir(os.path.join(root, 'sys/firmware/efi')) and os.path.isdir(os.path.join(root, 'sys')):
            result['enabled'] = False
            result['source'] = 'no /sys/firmware/efi (legacy BIOS boot)'
    for rel in DKMS_MOK_KEYS:
        if os.path.exists(os.path.join(root, rel)):
            result['dkms_mok']['path'] = '/' + rel
            if mokutil:
                rc, out, err = run_status(module, [mokutil, '--test-key', '/' + rel])
                result['dkms_mok']['enrolled'] = parse_mok_test_key(out + '\n' + err)
            break
    return result


def check_root(root):
    """Refuse a root that is not a directory holding a kernel release, naming it (never fall back to the host)."""
    if root in ('/', ''):
        return
    if not os.path.isdir(root):
        raise KernelError('root={0} is not a directory; give / or a tree holding proc/sys/kernel/osrelease'.format(
            root))
    if not os.path.isfile(os.path.join(root, 'proc/sys/kernel/osrelease')):
        raise KernelError('root={0} has no proc/sys/kernel/osrelease, so its running kernel cannot be told; give / or '
                          'a tree holding that file'.format(root))


def collect_kernel_facts(module, root='/', check_initramfs=False):
    """Return the ``kernel_state`` namespace."""
    root = root or '/'
    check_root(root)
    warnings = []
    identity = os_identity(_try_read(os.path.join(root, 'etc/os-release')),
                           _try_read(os.path.join(root, 'etc/debian_version')),
                           os.uname()[4] if root in ('/', '') else None)
    running = _running_release(root)
    installed, module_dirs = installed_kernels(root)
    default, default_source = _default_kernel(module, root, warnings)
    driver_node = _driver_node(module, root, identity, warnings)
    devel = {}
    build_paths = {}
    for release in [running] + ([default] if default else []) + installed:
        if release in devel:
            continue
        link = os.path.join('/lib/modules', release, 'build')
        resolved = resolve_in_root(root, link) if root != '/' else (
            os.path.realpath(link) if os.path.exists(link) else None)
        devel[release] = resolved is not None
        build_paths[release] = resolved
    pci = scan_pci(root)
    dkms = _dkms(module, root, warnings)
    return {
        'running': running,
        'installed': installed,
        'module_dirs': module_dirs,
        'default': default,
        'default_source': default_source,
        'devel': devel,
        'build_paths': build_paths,
        'nouveau': _nouveau(module, root, running, check_initramfs, warnings),
        'nvidia_module': _nvidia(module, root, running, warnings),
        'dkms': dkms,
        'dkms_logs': dkms_logs(root, dkms),
        'pci': pci,
        # The GPUDirect RDMA path (_rdma.py): ConnectX devices, nvidia_peermem, ACS, IOMMU, in this round trip.
        'rdma': collect_rdma_facts(module, root, run_status, [g['bus_id'] for g in pci['gpus']],
                                   [b['bus_id'] for b in pci['nvlink5_bridges']]),
        'secure_boot': _secure_boot(module, root, warnings),
        'os': identity,
        'driver_node': driver_node,
        'packages': kernel_packages((driver_node or {}).pop('kernel_packages', None),
                                    family_of(identity) if identity else None) if driver_node else None,
        'warnings': warnings,
    }


def _driver_node(module, root, identity, warnings):
    """What the driver plan reads besides these facts (_driver_node.read_driver_node); None for another root or an
    OS the roles do not support (the nvidia_driver plan then fails the node, naming it)."""
    if root not in ('/', '') or identity is None:
        return None
    try:
        return read_driver_node(module, family_of(identity))
    except DriverNodeError as exc:
        warnings.append('driver packages: {0}'.format(exc))
        return None


def kernel_packages(raw, family):
    """The installed kernel packages for the kernel role's plan: {name: [release, ...]} from the package list
    ({name: [{epoch, version, release, arch}]}, _driver_node.KERNEL_PACKAGE_RE).  On EL a release is what
    ``uname -r`` shows for that kernel (``<version>-<release>.<arch>``, as the kernel packages of EL and ELRepo name
    their /lib/modules directory); on Debian/Ubuntu the package version.  None when the list was not read."""
    if raw is None:
        return None
    out = {}
    for name in sorted(raw):
        releases = []
        for entry in raw[name] or []:
            if family == 'el':
                text = '{0}-{1}.{2}'.format(entry.get('version'), entry.get('release'), entry.get('arch'))
            else:
                text = '-'.join(part for part in (entry.get('version'), entry.get('release')) if part)
            if text not in releases:
                releases.append(text)
        out[name] = sorted(releases, key=version_key)
    return out


# The OS facts the kernel and nvidia_driver roles read, named as Ansible's setup module names them.
OS_FACT_KEYS = ('os_family', 'distribution', 'distribution_version', 'distribution_major_version', 'architecture')


def os_facts(facts):
    """The OS facts the kernel and nvidia_driver roles read, from ``ansible_facts``: Ansible's own when the play has
    them (os_family and distribution_major_version), else those of the gather (``kernel_state.os``, read from
    /etc/os-release in the same round trip), else what ``ansible_facts`` has.  Only the keys present are returned, so
    a role sees ``os_family`` undefined (and runs setup) when neither source has it."""
    facts = facts or {}
    source = facts
    if facts.get('os_family') is None or facts.get('distribution_major_version') is None:
        state_os = (facts.get('kernel_state') or {}).get('os')
        if isinstance(state_os, dict):
            source = state_os
    return dict((key, str(source[key])) for key in OS_FACT_KEYS if source.get(key) is not None)

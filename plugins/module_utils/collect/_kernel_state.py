# -*- coding: utf-8 -*-
# Copyright (c) gpufleet.nodeprep contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# This module_utils file is PRIVATE to the gpufleet.nodeprep collection.
# Its functions may change without notice; do not import it from other collections.
"""The ``kernel_state`` namespace of gpu_node_facts and kernel_facts: kernel, boot loader, nouveau, NVIDIA module,
DKMS, PCI and Secure Boot state, the OS identity and (through collect/_driver_node.py) the installed driver packages.

``collect_kernel_facts`` reads files below ``root`` (so a tree can stand in for a host) and runs grubby, modinfo, dkms
and lsinitrd/lsinitramfs through the collection's runner (collect/_runner.run_status) when it looks at the real
host.  The parsers it calls are in parsers/ (_kernel, _dkms_status, _os_release).  No Ansible import.
"""

from __future__ import absolute_import, division, print_function
__metaclass__ = type

import glob
import os
import re

from ansible_collections.gpufleet.nodeprep.plugins.module_utils.collect._driver_node import (
    DriverNodeError,
    read_driver_node,
)
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.collect._rdma_state import collect_rdma_facts
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.collect._runner import run_status
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._dkms_status import (
    DKMS_MODULES as NVIDIA_MODULES,
    make_log_path,
    read_dkms_status,
)
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._driver_packages import (
    family_of,
    image_meta_flavours,
    modules_queries,
    parse_apt_policy,
)
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._kernel import (
    KernelError,
    cmdline_blacklist,
    license_flavour,
    nvswitch_fabric,
    parse_bls_entry,
    parse_efi_secure_boot,
    parse_grub_cfg,
    parse_grubenv,
    parse_modprobe_conf,
    parse_mok_test_key,
    parse_nvidia_version_file,
    parse_proc_modules,
    parse_sb_state,
    release_from_image,
    resolve_grub_default,
    version_key,
    vpd_is_switch_bridge,
)
from ansible_collections.gpufleet.nodeprep.plugins.module_utils.parsers._os_release import os_identity

NVIDIA_VENDOR = '0x10de'
GPU_CLASSES = ('0x0300', '0x0302')
NVSWITCH_CLASS = '0x0680'
SECURE_BOOT_EFIVAR = 'sys/firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c'
# Where DKMS keeps the key it signs modules with: dkms 3.x (EL, Debian 13, Ubuntu 24.04+), then shim-signed (Ubuntu).
DKMS_MOK_KEYS = ('var/lib/dkms/mok.pub', 'var/lib/shim-signed/mok/MOK.der')
MODPROBE_DIRS = ('etc/modprobe.d', 'run/modprobe.d', 'usr/local/lib/modprobe.d', 'usr/lib/modprobe.d',
                 'lib/modprobe.d')
KERNEL_IMAGES = ('boot/vmlinuz-{0}', 'boot/vmlinux-{0}', 'boot/Image-{0}', 'lib/modules/{0}/vmlinuz')


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
    """``(entries, status)``: the ``dkms status`` listing and what the command said (``status``: ``ran``, ``rc``,
    ``stderr``, ``problems`` (lines that could not be read), ``missing`` (no dkms)).  Never raises: a failed command
    or an unreadable line is reported (warnings, status) and the listing holds what could be read, so the rules can
    call the DKMS state unknown (rules/_dkms.unknown_state)."""
    if root != '/':
        return dkms_tree_status(root), {'ran': False, 'source': 'tree'}
    dkms = module.get_bin_path('dkms')
    if dkms is None:
        return [], {'ran': False, 'missing': True}
    argv = [dkms, 'status']
    rc, out, err = run_status(module, argv)
    status = {'ran': True, 'rc': rc, 'stderr': (err or '').strip()[-2000:], 'problems': []}
    if rc != 0:
        warnings.append('dkms status failed (rc={0}): {1}'.format(rc, (err or '').strip()))
        return [], status
    entries, problems = read_dkms_status(out)
    for problem in problems:
        warnings.append(problem)
    status['problems'] = problems
    return entries, status


def dkms_tree(root, modules=NVIDIA_MODULES):
    """The version trees of the NVIDIA DKMS modules under <root>/var/lib/dkms, whatever ``dkms status`` says:
    ``[{module, version, source}]``, ``source`` whether its ``source`` link resolves (a tree whose source is gone is
    what makes dkms 3.0.x list nothing, dkms-project/dkms#352).  The ``kernel-<release>-<arch>`` links beside the
    versions are not versions."""
    out = []
    for module_name in modules:
        base = os.path.join(root, 'var/lib/dkms', module_name)
        for path in sorted(glob.glob(os.path.join(base, '*')), key=lambda p: version_key(os.path.basename(p))):
            name = os.path.basename(path)
            if os.path.islink(path) or not os.path.isdir(path) or name.startswith('kernel-'):
                continue
            rel = os.path.join('var/lib/dkms', module_name, name, 'source')
            source = os.path.isdir(os.path.join(root, rel)) if root in ('/', '') else \
                bool(resolve_in_root(root, rel)) and os.path.isdir(resolve_in_root(root, rel))
            out.append({'module': module_name, 'version': name, 'source': source})
    return out


def dkms_logs(root, entries, modules=NVIDIA_MODULES, limit=65536):
    """{'module/version': text} of the make.log a failed build of an NVIDIA DKMS module left
    (<root>/var/lib/dkms/<module>/<version>/build/make.log, _dkms_status.MAKE_LOG; its last ``limit`` bytes)."""
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
    dkms, dkms_status = _dkms(module, root, warnings)
    packages = kernel_packages((driver_node or {}).pop('kernel_packages', None),
                               family_of(identity) if identity else None) if driver_node else None
    if driver_node and family_of(identity) == 'debian':
        driver_node['apt_candidates'] = apt_candidates(
            module, modules_queries(driver_node.get('packages'), [running, default] + installed,
                                    image_meta_flavours(packages)), warnings)
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
        'dkms_status': dkms_status,
        'dkms_tree': dkms_tree(root),
        'dkms_logs': dkms_logs(root, dkms),
        'pci': pci,
        # The GPUDirect RDMA path (collect/_rdma_state.py): ConnectX devices, nvidia_peermem, ACS, IOMMU, in this round trip.
        'rdma': collect_rdma_facts(module, root, run_status, [g['bus_id'] for g in pci['gpus']],
                                   [b['bus_id'] for b in pci['nvlink5_bridges']]),
        'secure_boot': _secure_boot(module, root, warnings),
        'os': identity,
        'driver_node': driver_node,
        'packages': packages,
        'warnings': warnings,
    }


def apt_candidates(module, names, warnings):
    """``{name: candidate version | None}`` of Ubuntu's NVIDIA module packages (``names``, _driver_packages.
    modules_queries), from one ``apt-cache policy`` over the apt lists as they are (no refresh): None for a package
    apt has no candidate of, or does not know.  {} when there is nothing to ask; None when apt-cache could not be run
    (the rules then try the installation and read the result)."""
    if not names:
        return {}
    apt_cache = module.get_bin_path('apt-cache')
    if apt_cache is None:
        warnings.append('apt-cache not found: the apt candidates of {0} were not read'.format(', '.join(names)))
        return None
    argv = [apt_cache, 'policy'] + list(names)
    rc, out, err = run_status(module, argv)
    if rc != 0:
        warnings.append('apt-cache policy failed (rc={0}): {1}'.format(rc, (err or '').strip()))
        return None
    policy = parse_apt_policy(out)
    return dict((name, (policy.get(name) or {}).get('candidate')) for name in names)


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
